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
    table = tables.TableCollector(writer, limits.max_cols, limits.preview_rows, limits.preview_cols)
    reader = csv.reader(io.StringIO(text, newline=""), delimiter=delimiter or ",")
    try:
        for number, record in enumerate(reader, start=1):
            cells = record[: limits.max_cols]
            while cells and not cells[-1].strip():
                cells.pop()
            table.add(number, len(record), cells)
    except csv.Error as exc:
        raise Unreadable(f"The table cannot be read at record {reader.line_num:,}: {exc}.") from None
    if table.header is None:
        raise Unreadable("The file holds no rows.")
    columns = table.columns()
    part.update({"columns": columns, "header_row": table.header_row})
    how = f"{encoding}, {DELIMITER_NAMES[delimiter] if delimiter else 'one column'}"
    buffer = TextBuffer(limits.text_chars)
    size = f"{table.data_rows:,} rows × {len(columns):,} columns"
    buffer.add(f"=== Table: {size} ({how}), header in row {table.header_row} ===\n")
    buffer.add(table.shown(limits.cell_chars))
    meta: dict[str, Any] = {
        "encoding": encoding,
        "delimiter": delimiter or "",
        "rows": table.data_rows,
        "columns": len(columns),
        "header": columns[:50],
    }
    if nuls:
        meta["nul_bytes_dropped"] = nuls
    if table.columns_dropped:
        meta["columns_dropped"] = table.columns_dropped
    return Parsed(kind="csv", text=buffer.text(), meta=meta, index=writer.index())
