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
    header: list[Any] | None = None
    header_row = 0
    preview: list[list[Any]] = []
    data_rows = 0
    width = 0
    widest = 0
    part = writer.start_part(sheet.title)
    for number, row in enumerate(sheet.iter_rows(values_only=True), start=sheet.min_row or 1):
        widest = max(widest, len(row))
        cells = _trimmed(row, limits.max_cols)
        if not cells:
            continue
        if header is None:
            header, header_row = cells, number
            width = len(cells)
            continue
        width = max(width, len(cells))
        data_rows += 1
        writer.add(number, cells)
        if len(preview) < limits.preview_rows:
            preview.append([number, *cells[: limits.preview_cols]])
    width = max(width, len(header or []))
    columns = tables.column_names(header or [], width)
    part.update({"columns": columns, "header_row": header_row})
    first, last = tables.column_letter(0), tables.column_letter(max(width - 1, 0))
    shown = min(width, limits.preview_cols)
    title = f'=== Sheet "{sheet.title}": {data_rows:,} rows × {width:,} columns ({first}–{last})'
    if header is None:
        text.add(f"{title}: empty ===\n\n")
    else:
        title += f", header in row {header_row} ==="
        body = tables.markdown([tables.ROW, *columns[:shown]], preview, limits.cell_chars)
        notes = []
        if data_rows > len(preview):
            notes.append(f"the first {len(preview):,} of {data_rows:,} rows")
        if width > shown:
            notes.append(f"the first {shown} of {width:,} columns")
        note = f"\n[Shown: {' and '.join(notes)}; the document tools read the rest.]" if notes else ""
        text.add(f"{title}\n{body}{note}\n\n")
    info: dict[str, Any] = {"name": sheet.title, "rows": data_rows, "columns": width, "header": columns[:50]}
    if widest > limits.max_cols:
        info["columns_dropped"] = widest - limits.max_cols
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
