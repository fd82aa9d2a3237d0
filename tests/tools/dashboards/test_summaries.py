"""What the dashboard tools' results mean, in English and Russian: the answer the local model gives after a call.
Every number and title in it is one the result holds."""

from __future__ import annotations

import json

import pytest

from tools.dashboards import permissions
from tools.registry import registry

from .conftest import call, grant

pytestmark = pytest.mark.django_db


def summary(tool_name: str, output, language: str) -> str:
    # As the provider gets it: the tool message's JSON, parsed again.
    return registry.get(tool_name).schema()["summarize"](json.loads(json.dumps(output)), language)


def test_the_health_of_dashboard_42_in_both_languages(catalogue):
    report = call("dashboard_health", None, dashboard_id=42)

    english = summary("dashboard_health", report, "en")
    russian = summary("dashboard_health", report, "ru")

    # Each sentence a paragraph of its own: a line after another would run into it.
    assert english.split("\n\n")[:2] == [
        "Dashboard #42 “Воронка продаж по регионам” (published, owner Алексей Кузнецов): 0 errors, 2 warnings, 1 note.",
        "It has no errors, so it can be deployed to production.",
    ]
    assert "2 pending migrations: #" in english and "0003_region_code" in english and "0004_split_channel" in english
    assert "3 uncommitted changes." in english
    assert russian.split("\n\n")[:2] == [
        "Дашборд #42 «Воронка продаж по регионам» (опубликован, владелец Алексей Кузнецов): "
        "0 ошибок, 2 предупреждения, 1 замечание.",
        "Ошибок нет, поэтому его можно выкатить в продакшен.",
    ]
    assert "2 миграции ожидают" in russian
    # When it was last deployed, as a person reads a date, not as the tool's result holds it.
    stamps = [deployment["at"] for deployment in report["latest_deployments"].values() if deployment]
    assert stamps and not any(stamp in english + russian for stamp in stamps)
    assert english.count("Latest deployment to ") == russian.count(" г. ") == len(stamps)


def test_a_deployment_says_who_made_it_when_that_is_known(catalogue):
    report = call("dashboard_health", None, dashboard_id=42)
    report["latest_deployments"]["staging"]["by"] = None
    report["latest_deployments"]["production"]["by"] = "olivia"

    english = summary("dashboard_health", report, "en").splitlines()
    russian = summary("dashboard_health", report, "ru").splitlines()

    [staging] = [line for line in english if line.startswith("Latest deployment to staging")]
    [production] = [line for line in english if line.startswith("Latest deployment to production")]
    assert staging.endswith(" UTC.") and " by" not in staging and "—" not in staging
    assert production.endswith(" UTC, by olivia.")
    deployments = [line for line in russian if line.startswith("Последнее развёртывание")]
    assert [line.endswith(" UTC, выполнил olivia.") for line in deployments] == [False, True]
    assert not any("—" in line for line in deployments)


def test_a_search_lists_what_it_found_and_says_how_many_there_are(catalogue):
    found = call("search_dashboards", None, has_validation_problems=True, page_size=3)

    text = summary("search_dashboards", found, "en")

    lines = text.splitlines()
    assert lines[:2] == [f"Found {found['total']} dashboards:", ""]
    assert [line.split(" ", 2)[1] for line in lines[2:5]] == [f"#{item['id']}" for item in found["items"]]
    assert lines[5] == ""
    assert all(item["title"] in text for item in found["items"])
    assert lines[-1] == f"These are 3 of them (page 1 of {found['pages']}). Say “next” for more."
    assert summary("search_dashboards", call("search_dashboards", None, query="no-such-words"), "ru") == (
        "Ни один дашборд не подходит под этот поиск."
    )


def test_a_search_of_the_worst_first_says_so(catalogue):
    worst = call("search_dashboards", None, order="worst", has_validation_problems=True)
    assert summary("search_dashboards", worst, "en").startswith(f"Found {worst['total']} dashboards, the worst first:")
    assert summary("search_dashboards", worst, "ru").startswith(f"Найдено {worst['total']} дашборда, сначала худшие:")
    one = call("search_dashboards", None, order="worst", query="Воронка продаж по регионам")
    assert summary("search_dashboards", one, "en").startswith("Found 1 dashboard:")


def test_the_changing_tools_say_what_they_did(catalogue, alice):
    user = grant(alice, *permissions.ALL)

    branch = call("create_branch", user, dashboard_id=42, name="fix-totals")
    assert summary("create_branch", branch, "en") == "Created branch fix-totals of dashboard #42, from main."
    migration = call("execute_migration", user, dashboard_id=42)
    assert summary("execute_migration", migration, "ru") == (
        f"Миграция #{migration['migration_id']} «0003_region_code» дашборда #42: выполнена. Ещё ожидают: 1."
    )
    commit = call("commit_changes", user, dashboard_id=42, message="Tidy up")
    assert summary("commit_changes", commit, "en").startswith(f"Committed {len(commit['changes'])} changes to main")
    deployment = call("deploy_dashboard", user, dashboard_id=42, environment="staging")
    english = summary("deploy_dashboard", deployment, "en")
    assert english.startswith(f"Deployment #{deployment['deployment_id']} of dashboard #42")
    assert f"to staging: {deployment['status'].replace('_', ' ')}." in english
    # Its notes are told in the reader's language too.
    assert "pending migrations, not executed: 1" in deployment["notes"]
    assert "- pending migrations, not executed: 1" in english
    russian = summary("deploy_dashboard", deployment, "ru")
    assert "- ожидающие миграции, не выполненные: 1" in russian and "pending" not in russian
