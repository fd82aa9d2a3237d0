"""The document tools refuse arguments they do not know, nested ones too, instead of running without them."""

from __future__ import annotations

import pytest

from tools.registry import ToolArgumentsError, registry


@pytest.mark.parametrize(
    ("name", "args", "message"),
    [
        (
            "read_document",
            {"attachment_id": "a", "page": 2},
            "page: unknown argument (known: attachment_id, sheet, start, end)",
        ),
        ("read_document", {"attachment_id": "a", "start": "2"}, 'start: expected a whole number, got "2"'),
        (
            "search_document",
            {"attachment_id": "a", "query": "x", "limit": 5.0},
            "limit: expected a whole number, got 5.0",
        ),
        (
            "query_table",
            {"attachment_id": "a", "filters": [{"column": "Amount", "operator": "gt", "value": 1000}]},
            "filters.0.operator: unknown key (known: column, op, value)",
        ),
        (
            "query_table",
            {"attachment_id": "a", "aggregates": [{"func": "sum", "col": "Amount"}]},
            "aggregates.0.col: unknown key (known: func, column)",
        ),
        (
            "query_table",
            {"attachment_id": "a", "filters": [{"column": "Amount", "value": {"min": 1}}]},
            'filters.0.value: expected a string, a number or a list, got {"min": 1}',
        ),
        ("query_table", {"attachment_id": "a", "descending": "yes"}, 'descending: expected true or false, got "yes"'),
    ],
)
def test_arguments_that_do_not_fit_are_refused_with_the_field_named(name, args, message):
    with pytest.raises(ToolArgumentsError) as caught:
        registry.get(name).validate(args)
    assert str(caught.value) == f"Invalid arguments for {name}: {message}"


def test_a_query_normalises_to_every_setting_but_the_empty_ones():
    tool = registry.get("query_table")
    valid = tool.validate(
        {
            "attachment_id": "a",
            "filters": [
                {"column": "Amount", "op": "gt", "value": 1000},
                {"column": "Region", "op": "in", "value": ["EU", 7]},
            ],
            "aggregates": [{"func": "count"}],
        }
    )
    normalised = tool.normalise(valid)
    assert normalised == {
        "attachment_id": "a",
        "filters": [
            {"column": "Amount", "op": "gt", "value": 1000.0},
            {"column": "Region", "op": "in", "value": ["EU", 7.0]},
        ],
        "group_by": [],
        "aggregates": [{"func": "count"}],
        "columns": [],
        "descending": False,
        "limit": 20,
        "offset": 0,
    }
    assert tool.validate(normalised) == valid
