"""The dashboard tools on the global registry: names, flags, permission strings, what each user is offered."""

from __future__ import annotations

import pytest
from django.apps import apps
from django.contrib.auth.models import Permission

from tools.dashboards import permissions
from tools.registry import registry

from .conftest import grant

pytestmark = pytest.mark.django_db

# name: (permission, requires_confirmation)
TOOLS = {
    "search_dashboards": ("dashboards.view_dashboard", False),
    "dashboard_health": ("dashboards.view_dashboard", False),
    "create_branch": ("dashboards.create_branch", False),
    "deploy_dashboard": ("dashboards.deploy_dashboard", True),
    "execute_migration": ("dashboards.execute_migration", True),
    "commit_changes": ("dashboards.commit_changes", True),
}
DANGEROUS = {name for name, (_, confirm) in TOOLS.items() if confirm}


def dashboard_tools(user) -> set[str]:
    return {tool.name for tool in registry.permitted(user)} & set(TOOLS)


def test_the_app_is_its_own_django_app():
    config = apps.get_app_config("dashboards")
    assert config.name == "tools.dashboards"


@pytest.mark.parametrize(("name", "expected"), TOOLS.items())
def test_each_tool_is_registered_with_its_permission_and_confirmation(name, expected):
    tool = registry.get(name)
    assert (tool.permission, tool.requires_confirmation) == expected
    assert tool.description.strip()
    assert tool.schema()["parameters"]["type"] == "object"


def test_the_dangerous_three_say_they_wait_for_approval():
    assert {"deploy_dashboard", "execute_migration", "commit_changes"} == DANGEROUS
    for name in DANGEROUS:
        assert "approval" in registry.get(name).description


def test_every_permission_string_names_a_real_permission():
    assert set(permissions.ALL) == {permission for permission, _ in TOOLS.values()}
    for name in permissions.ALL:
        app_label, codename = name.split(".")
        assert Permission.objects.filter(content_type__app_label=app_label, codename=codename).exists(), name


def test_the_environment_is_one_of_two_in_the_schema():
    schema = registry.get("deploy_dashboard").schema()["parameters"]
    assert schema["properties"]["environment"]["enum"] == ["staging", "production"]
    assert schema["required"] == ["dashboard_id", "environment"]


def test_what_each_user_is_offered(alice, bob, admin_user):
    assert dashboard_tools(alice) == set()
    bob = grant(bob, permissions.VIEW)
    assert dashboard_tools(bob) == {"search_dashboards", "dashboard_health"}
    alice = grant(alice, *permissions.ALL)
    assert dashboard_tools(alice) == set(TOOLS)
    assert dashboard_tools(admin_user) == set(TOOLS)


def test_one_permission_offers_one_more_tool(bob):
    bob = grant(bob, permissions.VIEW, permissions.CREATE_BRANCH)
    assert dashboard_tools(bob) == {"search_dashboards", "dashboard_health", "create_branch"}
