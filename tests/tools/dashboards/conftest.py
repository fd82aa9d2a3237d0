"""The demo catalogue, users with chosen dashboard permissions, and calling a tool the way a run does."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth import get_user_model

from tools.dashboards import demo
from tools.registry import ToolContext, registry


def grant(user, *permissions: str):
    """The user, fresh from the database (permissions are cached per object), with `permissions` added."""
    user.user_permissions.add(*demo.permission_rows(permissions))
    return get_user_model().objects.get(pk=user.pk)


def call(tool_name: str, user, /, **args: Any) -> Any:
    """Validate the arguments against the tool's model and run it, as the orchestrator does, in this thread."""
    tool = registry.get(tool_name)
    return tool.func(tool.validate(args), ToolContext(user=user, page_context={}))


@pytest.fixture
def catalogue(db) -> demo.DemoSummary:
    return demo.load()
