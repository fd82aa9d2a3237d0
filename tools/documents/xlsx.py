"""XLSX with openpyxl (read-only, cached values), its XML parsed by defusedxml; the archive checked before opening.

Every sheet becomes a table with its header (the first non-empty row). The text shows the first rows and
columns of each sheet with the true size; every row goes to the content file for the tools.
"""

from __future__ import annotations

import zipfile
from typing import Any

import openpyxl
from defusedxml import DefusedXmlException

from . import tables
from .content import ContentWriter, plain
from .exceptions import Unreadable
from .limits import Limits, MiB
from .parsed import Parsed, Source, TextBuffer


def check_archive(path: str, limits: Limits) -> int:
    """Refuse a zip bomb from what the archive declares, before a byte is decompressed; returns the total."""
    try:
        with zipfile.ZipFile(path) as archive:
            members = archive.infolist()
    except (zipfile.BadZipFile, OSError, ValueError):
        raise Unreadable("The file starts like an XLSX (a ZIP archive) but its structure is broken.") from None
    if len(members) > limits.zip_members:
        raise Unreadable(f"The XLSX holds {len(members):,} files; at most {limits.zip_members:,} are accepted.")
    total = sum(member.file_size for member in members)
    if total > limits.zip_uncompressed:
        raise Unreadable(
            f"The XLSX would unpack to {total / MiB:,.0f} MB; at most {limits.zip_uncompressed // MiB} MB are "
            "accepted (a zip bomb?)."
        )
    for member in members:
        ratio = member.file_size / max(member.compress_size, 1)
        if member.file_size > MiB and ratio > limits.zip_ratio:
            raise Unreadable(
                f"The XLSX part {member.filename} would unpack {ratio:,.0f} times larger than it is stored; "
                f"at most {limits.zip_ratio} times is accepted (a zip bomb?)."
            )
    return total


def _root_cause(exc: BaseException) -> BaseException:
    for _ in range(10):
        inner = exc.__cause__ or exc.__context__
        if inner is None:
            break
        exc = inner
    return exc


def _brief(exc: BaseException) -> str:
    text = str(exc).strip() or type(exc).__name__
    return text if len(text) <= 200 else text[:199] + "…"


def _trimmed(row: tuple[Any, ...], width: int) -> list[Any]:
    cells = [plain(value) for value in row[:width]]
    while cells and cells[-1] in (None, ""):
        cells.pop()
    return cells


def _sheet(sheet, writer: ContentWriter, text: TextBuffer, limits: Limits) -> dict[str, Any]:
    part = writer.start_part(sheet.title)
    table = tables.TableCollector(writer, limits.max_cols, limits.preview_rows, limits.preview_cols)
    for number, row in enumerate(sheet.iter_rows(values_only=True), start=sheet.min_row or 1):
        table.add(number, len(row), _trimmed(row, limits.max_cols))
    columns = table.columns()
    part.update({"columns": columns, "header_row": table.header_row})
    width = len(columns)
    first, last = tables.column_letter(0), tables.column_letter(max(width - 1, 0))
    title = f'=== Sheet "{sheet.title}": {table.data_rows:,} rows × {width:,} columns ({first}–{last})'
    if table.header is None:
        text.add(f"{title}: empty ===\n\n")
    else:
        text.add(f"{title}, header in row {table.header_row} ===\n{table.shown(limits.cell_chars)}\n\n")
    info: dict[str, Any] = {"name": sheet.title, "rows": table.data_rows, "columns": width, "header": columns[:50]}
    if table.columns_dropped:
        info["columns_dropped"] = table.columns_dropped
    if getattr(sheet, "sheet_state", "visible") != "visible":
        info["hidden"] = True
    return info


def parse(source: Source) -> Parsed:
    limits = source.limits
    unpacked = check_archive(source.path, limits)
    writer = ContentWriter(source.content)
    text = TextBuffer(limits.text_chars)
    try:
        # A file object, not the path: openpyxl would judge a path by its extension.
        workbook = openpyxl.load_workbook(open(source.path, "rb"), read_only=True, data_only=True)  # noqa: SIM115
        try:
            sheets = [_sheet(sheet, writer, text, limits) for sheet in workbook.worksheets]
        finally:
            workbook.close()
    except (zipfile.BadZipFile, KeyError, ValueError, TypeError, AttributeError, SyntaxError, OSError) as exc:
        # openpyxl's answers to a workbook whose parts are missing or malformed; it wraps the XML parser's.
        cause = _root_cause(exc)
        if isinstance(cause, DefusedXmlException):
            raise Unreadable(
                "The XLSX's XML declares entities or a DTD (as a billion-laughs attack does); it was not read."
            ) from None
        raise Unreadable(
            f"The file is a ZIP archive like an XLSX but not a readable workbook ({_brief(cause)})."
        ) from None
    if not sheets:
        raise Unreadable("The workbook has no worksheets.")
    meta = {"sheets": sheets, "rows": sum(sheet["rows"] for sheet in sheets), "unpacked_bytes": unpacked}
    return Parsed(kind="xlsx", text=text.text().rstrip(), meta=meta, index=writer.index())
