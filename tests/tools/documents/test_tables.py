"""The table engine behind query_table: filters, groups, aggregates, sorting and paging, over numbered rows."""

from __future__ import annotations

import pytest

from tools.documents import tables
from tools.documents.tables import Aggregation, Condition, Query, QueryError

COLUMNS = ["Region", "Product", "Amount", "Date"]
ROWS = [
    (2, ["North", "Tea", 120, "2024-01-05"]),
    (3, ["South", "Coffee", "80,5", "2024-02-10"]),
    (4, ["North", "Coffee", 200, "2024-03-15"]),
    (5, ["East", "Tea", "50", None]),
    (6, ["north", "Cocoa"]),
]


def run(**fields):
    return tables.run(iter(ROWS), COLUMNS, Query(**fields))


def test_without_a_query_the_rows_come_with_their_numbers():
    result = run(limit=2)

    assert result["columns"] == ["_row", *COLUMNS]
    assert result["rows"] == [[2, "North", "Tea", 120, "2024-01-05"], [3, "South", "Coffee", "80,5", "2024-02-10"]]
    assert (result["matched"], result["next_offset"]) == (5, 2)


@pytest.mark.parametrize(
    ("condition", "rows"),
    [
        (Condition("Region", "eq", "NORTH"), [2, 4, 6]),
        (Condition("Amount", "gt", 100), [2, 4]),
        (Condition("Amount", "lte", "80.5"), [3, 5]),
        (Condition("Date", "gte", "2024-02-01"), [3, 4]),
        (Condition("Product", "contains", "co"), [3, 4, 6]),
        (Condition("Product", "not_contains", "co"), [2, 5]),
        (Condition("Product", "starts_with", "te"), [2, 5]),
        (Condition("Region", "in", ["East", "South"]), [3, 5]),
        (Condition("Amount", "is_empty"), [6]),
        (Condition("Date", "not_empty"), [2, 3, 4]),
        (Condition("Region", "ne", "north"), [3, 5]),
        (Condition("_row", "eq", 4), [4]),
        (Condition("C", "eq", 50), [5]),
    ],
)
def test_filters(condition, rows):
    assert [row[0] for row in run(filters=[condition])["rows"]] == rows


def test_filters_combine_with_and():
    result = run(filters=[Condition("Region", "eq", "north"), Condition("Product", "eq", "coffee")])

    assert [row[0] for row in result["rows"]] == [4]


def test_group_and_aggregate_sorted_biggest_first():
    result = run(group_by=["Region"], aggregates=[Aggregation("sum", "Amount"), Aggregation("count")])

    assert result["columns"] == ["Region", "sum(Amount)", "count"]
    # "North" and "north" are one group; text numbers ("80,5") are numbers.
    assert result["rows"] == [["North", 320, 3], ["South", 80.5, 1], ["East", 50, 1]]
    assert result["groups"] == 3


def test_aggregates_over_all_rows():
    result = run(
        aggregates=[
            Aggregation("avg", "Amount"),
            Aggregation("min", "Amount"),
            Aggregation("max", "Date"),
            Aggregation("count", "Date"),
        ]
    )

    assert result["rows"] == [[112.625, "50", "2024-03-15", 3]]


def test_sorting_and_paging_rows():
    result = run(sort_by="Amount", descending=True, columns=["Product", "Amount"], limit=2, offset=1)

    assert result["columns"] == ["_row", "Product", "Amount"]
    assert result["rows"] == [[2, "Tea", 120], [3, "Coffee", "80,5"]]
    assert result["next_offset"] == 3


def test_sorting_groups_by_an_aggregate():
    result = run(group_by=["Product"], aggregates=[Aggregation("count")], sort_by="count", descending=False)

    assert result["rows"][0][1] == 1


@pytest.mark.parametrize(
    ("text", "number"),
    [
        ("1 234,5", 1234.5),
        ("1,234.5", 1234.5),
        ("12.5", 12.5),
        ("-3", -3.0),
        ("1e3", 1000.0),
        ("abc", None),
        ("", None),
    ],
)
def test_numbers_are_read_from_text(text, number):
    assert tables.to_number(text) == number


def test_an_unknown_column_names_the_real_ones():
    with pytest.raises(QueryError, match=r"There is no column 'Price'\. The columns are: _row, Region, Product"):
        run(filters=[Condition("Price", "gt", 1)])


def test_a_comparison_needs_a_value():
    with pytest.raises(QueryError, match="needs a value"):
        run(filters=[Condition("Amount", "gt", None)])


def test_column_names_are_unique_and_never_blank():
    assert tables.column_names(["Name", None, "name", ""], 5) == ["Name", "B", "name (2)", "D", "E"]
    assert tables.column_letter(27) == "AB"
