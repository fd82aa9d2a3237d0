"""The tools that change something: what each one writes, who it records, and how each one refuses."""

from __future__ import annotations

import pytest
from django.utils import translation

from agentchat.sentences import translate
from tools.dashboards.exceptions import (
    BranchError,
    DashboardError,
    DashboardNotFound,
    DeploymentBlocked,
    NoPendingMigration,
    NothingToCommit,
)
from tools.dashboards.models import Branch, Change, Commit, Deployment, Migration
from tools.registry import ToolArgumentsError

from .conftest import call

pytestmark = pytest.mark.django_db


# --- create_branch ------------------------------------------------------------------------------


def test_create_branch_with_a_generated_name(catalogue, alice):
    result = call("create_branch", alice, dashboard_id=42)

    branch = Branch.objects.get(dashboard_id=42, name="alice/dashboard-42")
    assert branch.created_by == alice and branch.base == "main"
    assert result == {
        "dashboard_id": 42,
        "branch": "alice/dashboard-42",
        "base": "main",
        "created_by": "alice",
        "created_at": branch.created_at.isoformat(timespec="seconds"),
    }
    assert call("create_branch", alice, dashboard_id=42)["branch"] == "alice/dashboard-42-2"


def test_create_branch_with_a_name_and_a_base(catalogue, bob):
    result = call("create_branch", bob, dashboard_id=42, name="fix-region", base="feature/regional-breakdown")
    assert (result["branch"], result["base"]) == ("fix-region", "feature/regional-breakdown")
    assert Branch.objects.get(dashboard_id=42, name="fix-region").created_by == bob


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ({"dashboard_id": 42, "name": "feature/regional-breakdown"}, "has a branch named 'feature/regional-breakdown'"),
        ({"dashboard_id": 42, "name": "main"}, "has a branch named 'main'"),
        ({"dashboard_id": 42, "base": "nope"}, "has no branch 'nope'; its branches are: main, feature/regional"),
    ],
)
def test_create_branch_refusals(catalogue, alice, args, message):
    before = Branch.objects.count()
    with pytest.raises(BranchError, match=message):
        call("create_branch", alice, **args)
    assert Branch.objects.count() == before


def test_a_branch_name_is_checked_before_anything_runs(catalogue, alice):
    with pytest.raises(ToolArgumentsError, match=r"name: .*branch name"):
        call("create_branch", alice, dashboard_id=42, name="my branch")
    with pytest.raises(DashboardNotFound, match="no dashboard with id 4242"):
        call("create_branch", alice, dashboard_id=4242)


# --- deploy_dashboard -----------------------------------------------------------------------------


def test_deploy_to_production(catalogue, alice):
    result = call("deploy_dashboard", alice, dashboard_id=42, environment="production")

    deployment = Deployment.objects.get(pk=result["deployment_id"])
    assert (deployment.dashboard_id, deployment.environment, deployment.status) == (42, "production", "succeeded")
    assert deployment.deployed_by == alice
    assert deployment.commit == Commit.objects.filter(dashboard_id=42, branch="main").latest("created_at")
    assert result["commit"] == deployment.commit.sha[:10]
    assert result["deployed_by"] == "alice" and result["title"] == "Воронка продаж по регионам"
    assert result["notes"] == [
        "validation problems at warning level: 2",
        "uncommitted changes on main, not part of this deployment: 2",
        "pending migrations, not executed: 2",
    ]


def test_production_refuses_a_dashboard_with_errors_and_staging_takes_it(catalogue, alice):
    before = Deployment.objects.count()
    with pytest.raises(
        DeploymentBlocked, match=r"Dashboard 7 was not deployed: .*error-level .*\(1: missing_dataset\)"
    ):
        call("deploy_dashboard", alice, dashboard_id=7, environment="production")
    assert Deployment.objects.count() == before

    result = call("deploy_dashboard", alice, dashboard_id=7, environment="staging")
    assert result["environment"] == "staging" and result["status"] == "succeeded"
    assert Deployment.objects.count() == before + 1


def test_environment_names_are_forgiving_but_not_invented(catalogue, alice):
    assert call("deploy_dashboard", alice, dashboard_id=1, environment=" Prod ")["environment"] == "production"
    with pytest.raises(ToolArgumentsError, match=r'environment: must be one of staging, production, not "qa"$'):
        call("deploy_dashboard", alice, dashboard_id=1, environment="qa")


def test_deploy_an_unknown_dashboard(catalogue, alice):
    with pytest.raises(DashboardNotFound, match="There is no dashboard with id 99"):
        call("deploy_dashboard", alice, dashboard_id=99, environment="staging")


# --- execute_migration ----------------------------------------------------------------------------


def test_execute_the_next_pending_migration_until_none_is_left(catalogue, alice):
    first = call("execute_migration", alice, dashboard_id=42)
    assert (first["name"], first["status"], first["still_pending"]) == ("0003_region_code", "executed", 1)
    migration = Migration.objects.get(pk=first["migration_id"])
    assert migration.status == "executed" and migration.executed_by == alice and migration.executed_at

    assert call("execute_migration", alice, dashboard_id=42)["name"] == "0004_split_channel"
    with pytest.raises(NoPendingMigration, match="Dashboard 42 has no pending migration"):
        call("execute_migration", alice, dashboard_id=42)


def test_execute_a_named_migration(catalogue, alice):
    pending = Migration.objects.get(dashboard_id=42, name="0004_split_channel")
    assert call("execute_migration", alice, dashboard_id=42, migration_id=pending.pk)["name"] == "0004_split_channel"
    with pytest.raises(NoPendingMigration, match="'0004_split_channel' of dashboard 42 was executed already"):
        call("execute_migration", alice, dashboard_id=42, migration_id=pending.pk)
    with pytest.raises(NoPendingMigration, match="Dashboard 5 has no migration with id"):
        call("execute_migration", alice, dashboard_id=5, migration_id=pending.pk)
    assert Migration.objects.get(dashboard_id=42, name="0003_region_code").status == "pending"


# --- commit_changes -------------------------------------------------------------------------------


def test_commit_the_changes_on_main(catalogue, alice):
    result = call("commit_changes", alice, dashboard_id=42, message="Regional conversion chart")

    commit = Commit.objects.get(sha__startswith=result["commit"])
    assert (commit.dashboard_id, commit.branch, commit.message, commit.author) == (
        42,
        "main",
        "Regional conversion chart",
        alice,
    )
    assert (
        commit.changes
        == result["changes"]
        == [
            "Added a chart: conversion by region",
            "Renamed the tab Overview to Summary",
        ]
    )
    assert set(Change.objects.filter(commit=commit).values_list("branch", flat=True)) == {"main"}
    # The branch's change is not part of it.
    assert Change.objects.filter(dashboard_id=42, commit__isnull=True).count() == 1
    with pytest.raises(NothingToCommit, match="Nothing to commit: dashboard 42 has no uncommitted changes on main"):
        call("commit_changes", alice, dashboard_id=42)


def test_commit_on_a_branch_with_a_generated_message(catalogue, alice):
    result = call("commit_changes", alice, dashboard_id=42, branch="feature/regional-breakdown")
    assert result["branch"] == "feature/regional-breakdown"
    assert result["message"] == "Update dashboard 42: Added a drill-down from region to city"


def test_commit_refusals(catalogue, alice):
    before = Commit.objects.count()
    with pytest.raises(NothingToCommit, match="dashboard 1 has no uncommitted changes"):
        call("commit_changes", alice, dashboard_id=1)
    with pytest.raises(BranchError, match="Dashboard 42 has no branch 'dev'"):
        call("commit_changes", alice, dashboard_id=42, branch="dev")
    assert Commit.objects.count() == before


def test_every_refusal_is_a_sentence_said_again_in_the_readers_language(catalogue, alice):
    refusals = [
        ("create_branch", {"dashboard_id": 4242}),
        ("search_dashboards", {"tag": "nope"}),
        ("create_branch", {"dashboard_id": 42, "base": "nope"}),
        ("create_branch", {"dashboard_id": 42, "name": "main"}),
        ("deploy_dashboard", {"dashboard_id": 7, "environment": "production"}),
        ("execute_migration", {"dashboard_id": 1}),
        ("execute_migration", {"dashboard_id": 1, "migration_id": 999_999}),
        ("commit_changes", {"dashboard_id": 1}),
    ]
    said = []
    for name, args in refusals:
        with pytest.raises(DashboardError) as refused:
            call(name, alice, **args)
        said.append(str(refused.value))
    pending = Migration.objects.filter(status="pending").first()
    call("execute_migration", alice, dashboard_id=pending.dashboard_id, migration_id=pending.pk)
    with pytest.raises(DashboardError) as refused:
        call("execute_migration", alice, dashboard_id=pending.dashboard_id, migration_id=pending.pk)
    said.append(str(refused.value))

    with translation.override("ru"):
        russian = [translate(sentence) for sentence in said]
    assert [sentence for sentence, told in zip(said, russian, strict=True) if told == sentence] == []
    assert russian[0] == "Дашборда с id 4242 нет; нужный id находит search_dashboards."
