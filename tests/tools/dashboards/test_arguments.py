"""The dashboard tools take their arguments exactly as typed: what was approved is what runs."""

from __future__ import annotations

import pytest

from tools.registry import ToolArgumentsError, registry


@pytest.mark.parametrize(
    ("name", "args", "message"),
    [
        (
            "deploy_dashboard",
            {"dashboard_id": True, "environment": "production"},
            "dashboard_id: expected a whole number, got true",
        ),
        (
            "deploy_dashboard",
            {"dashboard_id": "42", "environment": "staging"},
            'dashboard_id: expected a whole number, got "42"',
        ),
        (
            "deploy_dashboard",
            {"dashboard_id": 42.0, "environment": "staging"},
            "dashboard_id: expected a whole number, got 42.0",
        ),
        (
            "search_dashboards",
            {"has_validation_errors": True},
            "has_validation_errors: unknown argument "
            "(known: query, owner, tag, status, has_validation_problems, severity, order, page, page_size)",
        ),
        (
            "search_dashboards",
            {"has_validation_problems": "true"},
            'has_validation_problems: expected true or false, got "true"',
        ),
        ("search_dashboards", {"page_size": "50"}, 'page_size: expected a whole number, got "50"'),
        (
            "deploy_dashboard",
            {"dashboard_id": 3, "environment": "moon"},
            'environment: must be one of staging, production, not "moon"',
        ),
        (
            "deploy_dashboard",
            {"dashboard_id": 3, "environment": 1},
            "environment: must be one of staging, production, not 1",
        ),
        ("commit_changes", {"dashboard_id": 3, "message": 42}, "message: expected a string, got 42"),
        (
            "execute_migration",
            {"dashboard_id": 3, "migration_id": "2"},
            'migration_id: expected a whole number, got "2"',
        ),
    ],
)
def test_arguments_that_do_not_fit_are_refused_with_the_field_named(name, args, message):
    with pytest.raises(ToolArgumentsError) as caught:
        registry.get(name).validate(args)
    assert str(caught.value) == f"Invalid arguments for {name}: {message}"


@pytest.mark.parametrize(
    ("name", "args", "normalised"),
    [
        (
            "deploy_dashboard",
            {"dashboard_id": 4, "environment": " Prod "},
            {"dashboard_id": 4, "environment": "production"},
        ),
        ("commit_changes", {"dashboard_id": 5}, {"dashboard_id": 5, "message": "", "branch": "main"}),
        ("execute_migration", {"dashboard_id": 1, "migration_id": None}, {"dashboard_id": 1}),
        (
            "create_branch",
            {"dashboard_id": 7, "name": " fix-filter "},
            {"dashboard_id": 7, "name": "fix-filter", "base": "main"},
        ),
        ("create_branch", {"dashboard_id": 7, "name": "  "}, {"dashboard_id": 7, "base": "main"}),
        (
            "search_dashboards",
            {"has_validation_problems": True},
            {
                "query": "",
                "owner": "",
                "tag": "",
                "has_validation_problems": True,
                "order": "id",
                "page": 1,
                "page_size": 10,
            },
        ),
    ],
)
def test_the_normalised_arguments_are_what_runs(name, args, normalised):
    tool = registry.get(name)
    valid = tool.validate(args)
    assert tool.normalise(valid) == normalised
    assert tool.validate(normalised) == valid
