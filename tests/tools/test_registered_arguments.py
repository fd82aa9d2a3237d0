"""Every tool the project registers: it refuses unknown arguments, and its examples normalise to a fixed point."""

from __future__ import annotations

import pytest

from tools.registry import ToolArgumentsError, registry


def test_every_example_normalises_to_arguments_that_validate_the_same():
    checked = set()
    for tool in registry.all():
        for _, args in tool.examples:
            valid = tool.validate(args)
            normalised = tool.normalise(valid)
            assert tool.validate(normalised) == valid, (tool.name, args)
            assert tool.normalise(tool.validate(normalised)) == normalised, (tool.name, args)
            checked.add(tool.name)
    assert {"search_dashboards", "dashboard_health", "deploy_dashboard", "commit_changes"} <= checked


def test_every_registered_tool_refuses_an_unknown_argument():
    for tool in registry.all():
        with pytest.raises(ToolArgumentsError, match="surely_not_an_argument: unknown argument"):
            tool.validate({"surely_not_an_argument": 1})
