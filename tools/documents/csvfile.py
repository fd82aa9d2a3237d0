"""CSV and other delimited text: the encoding (BOMs, UTF-8, then charset-normalizer's guess) and the delimiter
are detected; NUL bytes are dropped. The first record is the header.
"""

from __future__ import annotations

import codecs
import collections
import csv
import io
from typing import Any

import charset_normalizer

from . import tables
from .content import ContentWriter
from .exceptions import Unreadable, UnsupportedFormat
from .parsed import Parsed, Source, TextBuffer

DELIMITERS = (",", ";", "\t", "|")
SNIFF_CHARS = 64 * 1024
SNIFF_RECORDS = 50
BOMS = (
    (codecs.BOM_UTF32_LE, "utf-32"),
    (codecs.BOM_UTF32_BE, "utf-32"),
    (codecs.BOM_UTF8, "utf-8-sig"),
    (codecs.BOM_UTF16_LE, "utf-16"),
    (codecs.BOM_UTF16_BE, "utf-16"),
)
DELIMITER_NAMES = {",": "comma", ";": "semicolon", "\t": "tab", "|": "vertical bar"}


def decode(raw: bytes) -> tuple[str, str]:
    """The text and the name of its encoding."""
    for bom, encoding in BOMS:
        if raw.startswith(bom):
            return raw.decode(encoding, errors="replace"), encoding
    try:
        return raw.decode("utf-8"), "utf-8"
    except UnicodeDecodeError:
        pass
    best = charset_normalizer.from_bytes(raw).best()
    encoding = best.encoding if best is not None else "cp1252"
    return raw.decode(encoding, errors="replace"), encoding


def sniff(sample: str) -> str | None:
    """The delimiter that splits most of the first records into the same number (> 1) of fields."""
    best, best_score = None, 0
    for delimiter in DELIMITERS:
        records = [len(record) for record in _records(sample, delimiter) if record]
        if not records:
            continue
        width, agreeing = collections.Counter(records).most_common(1)[0]
        if width > 1 and agreeing > best_score:
            best, best_score = delimiter, agreeing
    return best


def _records(sample: str, delimiter: str) -> list[list[str]]:
    lines = sample.splitlines(keepends=True)
    if len(sample) >= SNIFF_CHARS and len(lines) > 1:
        lines = lines[:-1]  # the last line of a sample is most likely cut short
    try:
        reader = csv.reader(io.StringIO("".join(lines), newline=""), delimiter=delimiter)
        return [record for _, record in zip(range(SNIFF_RECORDS), reader, strict=False)]
    except csv.Error:
        return []


def parse(source: Source) -> Parsed:
    limits = source.limits
    with open(source.path, "rb") as file:
        raw = file.read()
    text, encoding = decode(raw)
    del raw
    nuls = text.count("\x00")
    if nuls:
        text = text.replace("\x00", "")
    delimiter = sniff(text[:SNIFF_CHARS])
    if delimiter is None and not source.name.lower().endswith((".csv", ".tsv")):
        raise UnsupportedFormat.because("plain text, not a table of delimited values")
    writer = ContentWriter(source.content)
    part = writer.start_part("CSV")
    header: list[Any] | None = None
    preview: list[list[Any]] = []
    width = widest = data_rows = header_row = 0
    reader = csv.reader(io.StringIO(text, newline=""), delimiter=delimiter or ",")
    try:
        for number, record in enumerate(reader, start=1):
            widest = max(widest, len(record))
            cells = record[: limits.max_cols]
            while cells and not cells[-1].strip():
                cells.pop()
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
    except csv.Error as exc:
        raise Unreadable(f"The table cannot be read at record {reader.line_num:,}: {exc}.") from None
    if header is None:
        raise Unreadable("The file holds no rows.")
    columns = tables.column_names(header, width)
    part.update({"columns": columns, "header_row": header_row})
    shown = min(width, limits.preview_cols)
    how = f"{encoding}, {DELIMITER_NAMES[delimiter] if delimiter else 'one column'}"
    notes = []
    if data_rows > len(preview):
        notes.append(f"the first {len(preview):,} of {data_rows:,} rows")
    if width > shown:
        notes.append(f"the first {shown} of {width:,} columns")
    body = tables.markdown([tables.ROW, *columns[:shown]], preview, limits.cell_chars)
    note = f"\n[Shown: {' and '.join(notes)}; the document tools read the rest.]" if notes else ""
    buffer = TextBuffer(limits.text_chars)
    buffer.add(f"=== Table: {data_rows:,} rows × {width:,} columns ({how}), header in row {header_row} ===\n")
    buffer.add(body + note)
    meta: dict[str, Any] = {
        "encoding": encoding,
        "delimiter": delimiter or "",
        "rows": data_rows,
        "columns": width,
        "header": columns[:50],
    }
    if nuls:
        meta["nul_bytes_dropped"] = nuls
    if widest > limits.max_cols:
        meta["columns_dropped"] = widest - limits.max_cols
    return Parsed(kind="csv", text=buffer.text(), meta=meta, index=writer.index())
