"""The document tools: read part of an attached file, search inside it, and query its table rows.

They read the content file written at upload (pages, rows, lines), never the original, so no file is
parsed again here. Only the files of the current conversation that belong to the user are reachable.
Docstrings and field descriptions are what the model reads.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from django.conf import settings
from pydantic import Field

from tools.files import StoredFile
from tools.registry import ToolArgs, ToolContext, registry

from . import tables
from .content import ContentReader, Part
from .context import describe

MAX_ROWS = 200
MAX_MATCHES = 50
# Tool output reaches the model's context: keep one answer well inside CONTEXT_TOKEN_BUDGET.
OUTPUT_FLOOR, OUTPUT_CEILING = 2_000, 24_000


class DocumentToolError(ValueError):
    """Said back to the model as the tool's error, so that it can correct its call."""


def output_limit() -> int:
    return max(OUTPUT_FLOOR, min(settings.CONTEXT_TOKEN_BUDGET, OUTPUT_CEILING))


AttachmentId = Field(
    description='The file\'s id from the list of attached files, e.g. "3f2c…"; its exact file name works too.',
    min_length=1,
    max_length=255,
)
Sheet = Field(
    None,
    max_length=255,
    description="XLSX: the sheet's name or number (1 = first). Leave out for the first sheet.",
)


IMAGES = {"png", "jpeg"}
TABLES = {"xlsx", "csv"}


def _file(ctx: ToolContext, ref: str) -> StoredFile:
    found = ctx.files.find(ref) if ctx.files is not None else None
    if found is None:
        names = [f'"{item.name}" (id {item.id})' for item in ctx.files.listed(10)] if ctx.files is not None else []
        listed = f" The files here are: {', '.join(names)}." if names else " No file is attached to this conversation."
        raise DocumentToolError(f"There is no attached file {ref!r} in this conversation.{listed}")
    return found


@contextmanager
def _reader(file: StoredFile) -> Iterator[ContentReader]:
    if file.open is None:
        raise DocumentToolError(f"{file.name} has no readable content.")
    with file.open() as source:
        yield ContentReader(source, file.index)


def _part(reader: ContentReader, file: StoredFile, sheet: str | None) -> Part:
    parts = reader.parts
    if not parts:
        raise DocumentToolError(f"{file.name} has no readable content.")
    if not sheet:
        return parts[0]
    wanted = sheet.strip()
    for part in parts:
        if part["name"] == wanted or part["name"].casefold() == wanted.casefold():
            return part
    if wanted.isdigit() and 1 <= int(wanted) <= len(parts):
        return parts[int(wanted) - 1]
    names = ", ".join(f'"{part["name"]}"' for part in parts)
    raise DocumentToolError(f"There is no sheet {sheet!r} in {file.name}. Its sheets: {names}.")


def _image_answer(file: StoredFile) -> str:
    description = describe(file)
    return f"{file.name} is an image ({description}); it holds no text to read or search."


# --- read_document ---------------------------------------------------------------------------------


class ReadArgs(ToolArgs):
    attachment_id: str = AttachmentId
    sheet: str | None = Sheet
    start: int = Field(
        1, ge=1, description="First page (PDF), row (XLSX/CSV; the header is row 1) or line (JSON) to read."
    )
    end: int | None = Field(None, ge=1, description="Last page, row or line to read; leave out to read what fits.")


@registry.tool(timeout=30)
def read_document(args: ReadArgs, ctx: ToolContext) -> str:
    """Read part of an attached file: pages of a PDF, rows of a spreadsheet sheet or CSV, or lines of a JSON file.

    Use it when the text shown with the message was cut, or to look at a page or row the user names."""
    file = _file(ctx, args.attachment_id)
    if file.kind in IMAGES:
        return _image_answer(file)
    limit = output_limit()
    with _reader(file) as reader:
        part = _part(reader, file, args.sheet)
        if args.end is not None and args.end < args.start:
            raise DocumentToolError("end must not be before start.")
        if "columns" in part:
            return _read_rows(reader, part, file, args, limit)
        return _read_text(reader, part, file, args, limit)


def _read_text(reader: ContentReader, part: Part, file: StoredFile, args: ReadArgs, limit: int) -> str:
    unit = "page" if file.kind == "pdf" else "line"
    total = part["last"]
    if args.start > total:
        raise DocumentToolError(f"{file.name} has {total:,} {unit}s; start is past the end.")
    blocks: list[str] = []
    size = 0
    last = args.start - 1
    for number, text in reader.units(part, args.start, args.end):
        block = f"=== Page {number} of {total} ===\n{text}" if unit == "page" else f"{number}: {text}"
        if blocks and size + len(block) > limit:
            break
        if not blocks and len(block) > limit:
            block = block[:limit] + f"\n[… the rest of {unit} {number} is cut here.]"
        blocks.append(block)
        size += len(block) + 1
        last = number
    wanted_end = min(args.end or total, total)
    head = f"{file.name}, {unit}s {args.start}–{last} of {total:,}:"
    tail = f"\n[Continue with start={last + 1}.]" if last < wanted_end else ""
    return head + "\n" + "\n".join(blocks) + tail


def _read_rows(reader: ContentReader, part: Part, file: StoredFile, args: ReadArgs, limit: int) -> str:
    columns = part["columns"]
    header_row = part.get("header_row", 1)
    rows = []
    size = 0
    for number, cells in reader.units(part, args.start, args.end):
        line = sum(len(tables.cell_text(cell)) + 3 for cell in cells) + 10
        if rows and (size + line > limit or len(rows) >= MAX_ROWS):
            break
        rows.append([number, *cells])
        size += line
    where = f'sheet "{part["name"]}" of {file.name}' if file.kind == "xlsx" else file.name
    if not rows:
        return f"No rows from row {args.start} in {where} (its data rows are {part['first']}–{part['last']})."
    last = rows[-1][0]
    body = tables.markdown([tables.ROW, *columns], rows)
    more = part["last"] > last and (args.end is None or args.end > last)
    tail = f"\n[Continue with start={last + 1}.]" if more else ""
    return (
        f"{where}: rows {rows[0][0]}–{last} of {part['count']:,} data rows (header in row {header_row}).\n{body}{tail}"
    )


# --- search_document ---------------------------------------------------------------------------------


class SearchArgs(ToolArgs):
    attachment_id: str = AttachmentId
    query: str = Field(min_length=1, max_length=200, description="Words to find; case does not matter.")
    sheet: str | None = Field(None, max_length=255, description="XLSX: search only this sheet (name or number).")
    limit: int = Field(20, ge=1, le=MAX_MATCHES, description="At most this many matches.")


def _matcher(query: str):
    phrase = " ".join(query.split()).casefold()
    words = phrase.split()

    def found(text: str) -> bool:
        text = " ".join(text.split()).casefold()
        return phrase in text or (len(words) > 1 and all(word in text for word in words))

    return found


def _snippet(text: str, query: str, width: int = 160) -> str:
    flat = " ".join(text.split())
    at = flat.casefold().find(query.split()[0].casefold())
    start = max(at - width // 3, 0) if at >= 0 else 0
    piece = flat[start : start + width]
    return ("…" if start else "") + piece + ("…" if start + width < len(flat) else "")


@registry.tool(timeout=30)
def search_document(args: SearchArgs, ctx: ToolContext) -> str:
    """Find words in an attached file. Each match says where it is: the page (PDF), the sheet and row (XLSX/CSV)
    or the line (JSON), with the text around it."""
    file = _file(ctx, args.attachment_id)
    if file.kind in IMAGES:
        return _image_answer(file)
    found = _matcher(args.query)
    matches: list[str] = []
    total = 0
    with _reader(file) as reader:
        parts = [_part(reader, file, args.sheet)] if args.sheet else reader.parts
        for part in parts:
            for number, value in reader.units(part):
                if "columns" in part:
                    cells = [tables.cell_text(cell) for cell in value]
                    if not any(found(cell) for cell in cells if cell):
                        continue
                    total += 1
                    if len(matches) < args.limit:
                        pairs = "; ".join(
                            f"{name}: {cell}" for name, cell in zip(part["columns"], cells, strict=False) if cell
                        )
                        where = f'sheet "{part["name"]}", ' if file.kind == "xlsx" else ""
                        matches.append(f"- {where}row {number}: {pairs[:400]}")
                    continue
                for line in str(value).splitlines() if file.kind == "pdf" else [str(value)]:
                    if found(line):
                        total += 1
                        if len(matches) < args.limit:
                            unit = "page" if file.kind == "pdf" else "line"
                            matches.append(f"- {unit} {number}: {_snippet(line, args.query)}")
    if not total:
        return f"No match for {args.query!r} in {file.name}."
    shown = "\n".join(matches)
    more = f"\n[{total - len(matches):,} more matches are not shown.]" if total > len(matches) else ""
    answer = f"{total:,} matches for {args.query!r} in {file.name}:\n{shown}{more}"
    return answer[: output_limit()]


# --- query_table ---------------------------------------------------------------------------------


class Filter(ToolArgs):
    column: str = Field(max_length=255, description='A column name, a column letter ("B"), or "_row" (row number).')
    op: tables.Op = Field("eq", description="Numbers compare as numbers, dates as YYYY-MM-DD; in takes a list.")
    value: str | float | list[str | float] | None = Field(None, description="What to compare with.")


class Aggregate(ToolArgs):
    func: tables.Func
    column: str | None = Field(None, max_length=255, description="The column; leave out for count of rows.")


class QueryArgs(ToolArgs):
    attachment_id: str = AttachmentId
    sheet: str | None = Sheet
    filters: list[Filter] = Field(default_factory=list, max_length=20, description="Rows must pass all of these.")
    group_by: list[str] = Field(default_factory=list, max_length=5, description="Columns to group rows by.")
    aggregates: list[Aggregate] = Field(
        default_factory=list, max_length=10, description="What to compute per group (or over all rows)."
    )
    columns: list[str] = Field(default_factory=list, max_length=50, description="Columns to show; leave out for all.")
    sort_by: str | None = Field(
        None, max_length=255, description='A column, or an aggregate such as "sum(Amount)" when grouping.'
    )
    descending: bool = False
    limit: int = Field(20, ge=1, le=MAX_ROWS, description="Rows (or groups) to return.")
    offset: int = Field(0, ge=0, description="Rows (or groups) to skip first, for the next page.")


@registry.tool(timeout=30)
def query_table(args: QueryArgs, ctx: ToolContext) -> str:
    """Filter, group and aggregate the rows of an attached spreadsheet (XLSX) or CSV, over all its rows.

    Examples: rows where Amount > 1000; count rows per Region; sum(Amount) grouped by Region; the row whose
    _row is 5000 (rows are numbered as a spreadsheet shows them, the header being row 1)."""
    file = _file(ctx, args.attachment_id)
    if file.kind not in TABLES:
        raise DocumentToolError(
            f"{file.name} is a {file.kind.upper()}, not a table; use read_document or search_document."
        )
    query = tables.Query(
        filters=[tables.Condition(item.column, item.op, item.value) for item in args.filters],
        group_by=args.group_by,
        aggregates=[tables.Aggregation(item.func, item.column) for item in args.aggregates],
        columns=args.columns,
        sort_by=args.sort_by,
        descending=args.descending,
        limit=args.limit,
        offset=args.offset,
    )
    with _reader(file) as reader:
        part = _part(reader, file, args.sheet)
        try:
            result = tables.run(reader.units(part), part["columns"], query)
        except tables.QueryError as exc:
            raise DocumentToolError(str(exc)) from None
    return _table_answer(file, part, result)


def _table_answer(file: StoredFile, part: Part, result: dict[str, Any]) -> str:
    where = f'sheet "{part["name"]}" of {file.name}' if file.kind == "xlsx" else file.name
    rows = result["rows"]
    if "groups" in result:
        head = f"{where}: {result['groups']:,} groups."
    else:
        head = f"{where}: {result['matched']:,} of {part['count']:,} data rows match."
    limit = output_limit()
    body = tables.markdown(result["columns"], rows)
    while len(body) > limit and len(rows) > 1:
        rows = rows[: max(len(rows) // 2, 1)]
        body = (
            tables.markdown(result["columns"], rows) + f"\n[Cut to {len(rows)} rows to fit; ask with a smaller limit.]"
        )
    if not rows:
        return head
    more = f"\n[More: ask again with offset={result['next_offset']}.]" if "next_offset" in result else ""
    return f"{head}\n{body}{more}"
