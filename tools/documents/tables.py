# Over 400 lines: the table engine of query_table (columns, filters, groups, aggregates) reads best in one piece.
"""Tables: their columns, their text for the model, and the filter / group / aggregate engine of query_table.

Rows are numbered as a spreadsheet shows them: in a CSV the header is row 1, in an XLSX each row keeps
its sheet row number. The pseudo-column `_row` is that number.
"""

from __future__ import annotations

import heapq
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

ROW = "_row"
ROW_INDEX = -1

Op = Literal[
    "eq", "ne", "gt", "gte", "lt", "lte", "contains", "not_contains", "starts_with", "in", "is_empty", "not_empty"
]
Func = Literal["count", "sum", "avg", "min", "max"]

_NUMBER = re.compile(r"^[-+]?(\d+|\d{1,3}(,\d{3})+|\d{1,3}( \d{3})+)?([.,]\d+)?([eE][-+]?\d+)?$")
_SPACES = str.maketrans("", "", " \u00a0\u202f\u2009")


class QueryError(ValueError):
    """A query the table cannot answer; the message tells the model what to change."""


def column_letter(index: int) -> str:
    """0 → A, 25 → Z, 26 → AA."""
    letters = ""
    index += 1
    while index:
        index, rest = divmod(index - 1, 26)
        letters = chr(65 + rest) + letters
    return letters


def column_names(header: Sequence[Any], width: int) -> list[str]:
    """One unique name per column: the header's text, or the column's letter where it has none."""
    names: list[str] = []
    seen: dict[str, int] = {}
    for index in range(width):
        raw = header[index] if index < len(header) else None
        name = " ".join(str(raw).split()) if raw not in (None, "") else ""
        name = name or column_letter(index)
        key = name.casefold()
        if key in seen:
            seen[key] += 1
            name = f"{name} ({seen[key]})"
        else:
            seen[key] = 1
        names.append(name)
    return names


def cell_text(value: Any, limit: int = 200) -> str:
    if value is None:
        return ""
    text = " ".join(str(value).split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def markdown(columns: Sequence[str], rows: Iterable[Sequence[Any]], cell_chars: int = 200) -> str:
    def line(cells: Sequence[Any]) -> str:
        return "| " + " | ".join(cell_text(cell, cell_chars).replace("|", "\\|") for cell in cells) + " |"

    lines = [line(columns), "|" + "---|" * len(columns)]
    lines += [line([*row, *[None] * (len(columns) - len(row))][: len(columns)]) for row in rows]
    return "\n".join(lines)


class RowWriter(Protocol):
    def add(self, number: int, value: Any) -> None: ...


@dataclass
class TableCollector:
    """One table read row by row (a CSV, a sheet): the first non-empty row is its header, the rest are
    written for the document tools, and the first few are kept as the preview the model reads."""

    writer: RowWriter
    max_cols: int
    preview_rows: int
    preview_cols: int
    header: list[Any] | None = None
    header_row: int = 0
    width: int = 0
    widest: int = 0
    data_rows: int = 0
    preview: list[list[Any]] = field(default_factory=list)

    def add(self, number: int, raw_width: int, cells: list[Any]) -> None:
        """`cells` are the row's first `max_cols` cells with the empty ones at the end removed."""
        self.widest = max(self.widest, raw_width)
        if not cells:
            return
        if self.header is None:
            self.header, self.header_row, self.width = cells, number, len(cells)
            return
        self.width = max(self.width, len(cells))
        self.data_rows += 1
        self.writer.add(number, cells)
        if len(self.preview) < self.preview_rows:
            self.preview.append([number, *cells[: self.preview_cols]])

    def columns(self) -> list[str]:
        return column_names(self.header or [], max(self.width, len(self.header or [])))

    @property
    def columns_dropped(self) -> int:
        return max(self.widest - self.max_cols, 0)

    def shown(self, cell_chars: int) -> str:
        """The preview as a Markdown table, with a note of what the tools still hold."""
        columns = self.columns()
        shown = min(len(columns), self.preview_cols)
        body = markdown([ROW, *columns[:shown]], self.preview, cell_chars)
        notes = []
        if self.data_rows > len(self.preview):
            notes.append(f"the first {len(self.preview):,} of {self.data_rows:,} rows")
        if len(columns) > shown:
            notes.append(f"the first {shown} of {len(columns):,} columns")
        return body + (f"\n[Shown: {' and '.join(notes)}; the document tools read the rest.]" if notes else "")


def to_number(value: Any) -> float | None:
    """A cell's number, also from text such as "1 234,5", "1,234.5" or "12.5"; None when it is not one."""
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, int | float):
        return float(value)
    text = str(value).strip().translate(_SPACES)
    if not text or not _NUMBER.match(text) or not any(char.isdigit() for char in text):
        return None
    if "," in text and "." in text:
        text = text.replace(",", "")
    elif text.count(",") == 1:
        text = text.replace(",", ".")
    else:
        text = text.replace(",", "")
    try:
        return float(text)
    except ValueError:
        return None


def resolve(ref: str, columns: Sequence[str]) -> int:
    """A column by its name (any case), its letter (A, B, …, AA) or `_row`; QueryError names the choices."""
    wanted = " ".join(str(ref).split())
    if wanted.casefold() in {ROW, "row", "#"} and wanted not in columns:
        return ROW_INDEX
    for index, name in enumerate(columns):
        if name == wanted:
            return index
    for index, name in enumerate(columns):
        if name.casefold() == wanted.casefold():
            return index
    if re.fullmatch(r"[A-Za-z]{1,3}", wanted):
        index = 0
        for char in wanted.upper():
            index = index * 26 + ord(char) - 64
        if index - 1 < len(columns):
            return index - 1
    shown = ", ".join(columns[:60]) + (" …" if len(columns) > 60 else "")
    raise QueryError(f"There is no column {ref!r}. The columns are: {ROW}, {shown}.")


def _value(number: int, cells: Sequence[Any], index: int) -> Any:
    if index == ROW_INDEX:
        return number
    return cells[index] if index < len(cells) else None


def _empty(cell: Any) -> bool:
    return cell is None or (isinstance(cell, str) and not cell.strip())


def _equal(cell: Any, value: Any) -> bool:
    left, right = to_number(cell), to_number(value)
    if left is not None and right is not None:
        return left == right
    if _empty(cell) or value is None:
        return _empty(cell) and (value is None or _empty(value))
    return str(cell).strip().casefold() == str(value).strip().casefold()


def _compare(cell: Any, value: Any) -> int | None:
    """-1, 0, 1 comparing numbers as numbers and anything else as text (ISO dates sort right); None if empty."""
    if _empty(cell) or value is None:
        return None
    left, right = to_number(cell), to_number(value)
    if left is not None and right is not None:
        return (left > right) - (left < right)
    a, b = str(cell).strip().casefold(), str(value).strip().casefold()
    return (a > b) - (a < b)


def matches(cell: Any, op: str, value: Any) -> bool:
    if op == "is_empty":
        return _empty(cell)
    if op == "not_empty":
        return not _empty(cell)
    if op == "eq":
        return _equal(cell, value)
    if op == "ne":
        return not _equal(cell, value)
    if op == "in":
        return any(_equal(cell, item) for item in (value if isinstance(value, list) else [value]))
    if op in {"contains", "not_contains", "starts_with"}:
        text, needle = ("" if cell is None else str(cell)).casefold(), str(value or "").casefold()
        if op == "starts_with":
            return text.strip().startswith(needle.strip())
        return (needle in text) == (op == "contains")
    order = _compare(cell, value)
    if order is None:
        return False
    return {"gt": order > 0, "gte": order >= 0, "lt": order < 0, "lte": order <= 0}[op]


def sort_key(value: Any) -> tuple:
    """Numbers before text, empty cells last."""
    if _empty(value):
        return (2, 0.0, "")
    number = to_number(value)
    if number is not None:
        return (0, number, "")
    return (1, 0.0, " ".join(str(value).split()).casefold())


@dataclass
class _Accumulator:
    count: int = 0
    numbers: int = 0
    total: float = 0.0
    low: Any = None
    high: Any = None

    def add(self, cell: Any) -> None:
        if _empty(cell):
            return
        self.count += 1
        number = to_number(cell)
        if number is not None:
            self.numbers += 1
            self.total += number
        if self.low is None or sort_key(cell) < sort_key(self.low):
            self.low = cell
        if self.high is None or sort_key(cell) > sort_key(self.high):
            self.high = cell

    def result(self, func: str) -> Any:
        if func == "count":
            return self.count
        if func == "sum":
            return _tidy(self.total) if self.numbers else None
        if func == "avg":
            return _tidy(self.total / self.numbers) if self.numbers else None
        return self.low if func == "min" else self.high


def _tidy(number: float) -> float | int:
    rounded = round(number, 6)
    return int(rounded) if rounded.is_integer() and abs(rounded) < 2**53 else rounded


@dataclass(frozen=True)
class Condition:
    column: str
    op: str
    value: Any = None


@dataclass(frozen=True)
class Aggregation:
    func: str
    column: str | None = None

    @property
    def label(self) -> str:
        return f"{self.func}({self.column})" if self.column else self.func


@dataclass
class Query:
    filters: list[Condition] = field(default_factory=list)
    group_by: list[str] = field(default_factory=list)
    aggregates: list[Aggregation] = field(default_factory=list)
    columns: list[str] = field(default_factory=list)
    sort_by: str | None = None
    descending: bool = False
    limit: int = 20
    offset: int = 0


def run(rows: Iterable[tuple[int, Sequence[Any]]], columns: Sequence[str], query: Query) -> dict[str, Any]:
    """Rows that pass every filter; grouped and aggregated when asked, sorted, then the page offset..limit."""
    filters = [(resolve(item.column, columns), item.op, item.value) for item in query.filters]
    for _, op, value in filters:
        if op not in {"is_empty", "not_empty"} and value is None:
            raise QueryError(f"The filter {op!r} needs a value.")
    kept = (
        (number, cells)
        for number, cells in rows
        if all(matches(_value(number, cells, index), op, value) for index, op, value in filters)
    )
    if query.group_by or query.aggregates:
        return _grouped(kept, columns, query)
    return _listed(kept, columns, query)


def _listed(rows: Iterable[tuple[int, Sequence[Any]]], columns: Sequence[str], query: Query) -> dict[str, Any]:
    shown = [resolve(name, columns) for name in query.columns] if query.columns else list(range(len(columns)))
    shown = [index for index in shown if index != ROW_INDEX]
    wanted = query.offset + query.limit
    matched = 0
    if query.sort_by:
        index = resolve(query.sort_by, columns)
        keyed = ((sort_key(_value(number, cells, index)), number, cells) for number, cells in rows)
        counted = _Counted(keyed)
        if query.descending:
            best = heapq.nlargest(wanted, counted, key=lambda item: (item[0][0] != 2, item[0], -item[1]))
        else:
            best = heapq.nsmallest(wanted, counted, key=lambda item: (item[0], item[1]))
        page = [(number, cells) for _, number, cells in best[query.offset :]]
        matched = counted.count
    else:
        page = []
        for number, cells in rows:
            if query.offset <= matched < wanted:
                page.append((number, cells))
            matched += 1
    result: dict[str, Any] = {
        "columns": [ROW, *(columns[index] for index in shown)],
        "rows": [[number, *(_value(number, cells, index) for index in shown)] for number, cells in page],
        "matched": matched,
    }
    if matched > wanted:
        result["next_offset"] = wanted
    return result


class _Counted:
    """Passes items through and counts them (heapq needs an iterable, the answer needs the count)."""

    def __init__(self, items: Iterable):
        self.items = iter(items)
        self.count = 0

    def __iter__(self):
        for item in self.items:
            self.count += 1
            yield item


def _grouped(rows: Iterable[tuple[int, Sequence[Any]]], columns: Sequence[str], query: Query) -> dict[str, Any]:
    keys = [resolve(name, columns) for name in query.group_by]
    aggregates = query.aggregates or [Aggregation("count")]
    targets = []
    for aggregate in aggregates:
        if aggregate.column is None and aggregate.func != "count":
            raise QueryError(f"{aggregate.func} needs a column.")
        targets.append(None if aggregate.column is None else resolve(aggregate.column, columns))
    groups: dict[tuple, list] = {}
    shown: dict[tuple, tuple] = {}
    for number, cells in rows:
        raw = tuple(_value(number, cells, index) for index in keys)
        key = tuple(sort_key(value) for value in raw)
        if key not in groups:
            groups[key] = [_Accumulator() for _ in aggregates]
            shown[key] = raw
        for accumulator, target in zip(groups[key], targets, strict=True):
            if target is None:
                accumulator.count += 1
            else:
                accumulator.add(_value(number, cells, target))
    labels = [ROW if index == ROW_INDEX else columns[index] for index in keys]
    header = [*labels, *(aggregate.label for aggregate in aggregates)]
    table = [
        [*shown[key], *(acc.result(aggregate.func) for acc, aggregate in zip(accs, aggregates, strict=True))]
        for key, accs in groups.items()
    ]
    if query.sort_by:
        wanted = " ".join(query.sort_by.split()).casefold()
        position = next((i for i, name in enumerate(header) if name.casefold() == wanted), None)
        if position is None:
            raise QueryError(f"Sort by one of the result's columns: {', '.join(header)}.")
    else:
        # Biggest first by the first aggregate: "which region sold most" is the usual question.
        position, query.descending = len(labels), True
    table.sort(key=lambda row: sort_key(row[position]), reverse=query.descending)
    if query.descending:
        # Empty results last, even when reversed.
        table.sort(key=lambda row: _empty(row[position]))
    page = table[query.offset : query.offset + query.limit]
    result: dict[str, Any] = {"columns": header, "rows": page, "groups": len(table)}
    if len(table) > query.offset + query.limit:
        result["next_offset"] = query.offset + query.limit
    return result
