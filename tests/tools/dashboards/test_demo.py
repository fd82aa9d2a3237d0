"""`manage.py load_demo` loads the demo catalogue: stable ids, both languages, idempotent, permissions."""

from __future__ import annotations

import re
from io import StringIO

import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command

from tools.dashboards import permissions
from tools.dashboards.models import Branch, Change, Commit, Dashboard, Deployment, Migration, Tag, ValidationProblem

pytestmark = pytest.mark.django_db

User = get_user_model()
MODELS = [Dashboard, Tag, ValidationProblem, Branch, Commit, Change, Migration, Deployment]
CYRILLIC = re.compile(r"[а-яё]", re.IGNORECASE)


def load_demo() -> str:
    out = StringIO()
    call_command("load_demo", stdout=out)
    return out.getvalue()


def snapshot() -> dict:
    return {model.__name__: sorted(model.objects.values_list("pk", flat=True)) for model in MODELS} | {
        "titles": list(Dashboard.objects.order_by("pk").values_list("pk", "title", "status"))
    }


def person(username: str):
    return User.objects.get(username=username)  # fresh: permissions are cached per object


def test_the_catalogue():
    output = load_demo()

    total = Dashboard.objects.count()
    with_problems = Dashboard.objects.filter(problems__isnull=False).distinct().count()
    assert total >= 60
    assert 0.25 <= with_problems / total <= 0.4
    assert "Demo dashboards: 64 in the catalogue, 22 with validation problems (loaded now)" in output
    dashboard = Dashboard.objects.get(pk=42)
    assert dashboard.title == "Воронка продаж по регионам"
    assert dashboard.problems.exists()
    titles = list(Dashboard.objects.values_list("title", flat=True))
    russian = [title for title in titles if CYRILLIC.search(title)]
    english = [title for title in titles if title.isascii()]
    assert len(russian) >= 20 and len(english) >= 20
    assert set(Dashboard.objects.values_list("status", flat=True)) == set(Dashboard.Status.values)
    assert set(ValidationProblem.objects.values_list("severity", flat=True)) == set(ValidationProblem.Severity.values)


def test_every_dangerous_tool_has_something_to_do():
    load_demo()
    assert Migration.objects.filter(status=Migration.Status.PENDING).values("dashboard").distinct().count() >= 3
    assert Change.objects.filter(commit__isnull=True).values("dashboard").distinct().count() >= 3
    assert Migration.objects.filter(dashboard_id=42, status=Migration.Status.PENDING).exists()
    assert Change.objects.filter(dashboard_id=42, commit__isnull=True, branch="main").exists()
    assert not ValidationProblem.objects.filter(dashboard_id=42, severity=ValidationProblem.Severity.ERROR).exists()


def test_alice_may_do_everything_and_bob_only_look():
    load_demo()
    alice, bob = person("alice"), person("bob")
    assert all(alice.has_perm(name) for name in permissions.ALL)
    assert bob.has_perm(permissions.VIEW)
    assert not any(bob.has_perm(name) for name in permissions.ALL if name != permissions.VIEW)


def test_running_twice_changes_nothing():
    load_demo()
    before = snapshot()
    output = load_demo()
    assert snapshot() == before
    assert "(left as they were)" in output


def test_what_a_person_changed_is_kept():
    load_demo()
    dashboard = Dashboard.objects.get(pk=42)
    dashboard.title = "Sales funnel by region"
    dashboard.save()
    ValidationProblem.objects.filter(dashboard_id=42, code="stale_data").delete()
    Dashboard.objects.filter(pk=64).delete()
    alice = person("alice")
    alice.user_permissions.remove(*alice.user_permissions.filter(codename="deploy_dashboard"))

    load_demo()

    assert Dashboard.objects.get(pk=42).title == "Sales funnel by region"
    assert not ValidationProblem.objects.filter(dashboard_id=42, code="stale_data").exists()
    assert not Dashboard.objects.filter(pk=64).exists()
    assert not person("alice").has_perm(permissions.DEPLOY)


def test_a_demo_user_made_again_gets_their_permissions_again():
    load_demo()
    person("bob").delete()
    load_demo()
    assert person("bob").has_perm(permissions.VIEW)


def test_a_new_dashboard_gets_the_next_free_id():
    load_demo()
    assert Dashboard.objects.create(title="New", owner="Someone").pk == 65
