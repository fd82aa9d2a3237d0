"""The content file: a document's pages, rows or lines as JSON Lines, written once at upload, read by the tools.

Each line is `[number, value]`: a page number and its text, a row number (as a spreadsheet shows it) and its
cells, or a line number and its text. Lines are grouped in parts (a PDF's pages, each sheet, a JSON file's
lines). The index says where each part starts and where every MARK_EVERY-th unit is, so that row 5,000
of a large sheet is a seek and a short read away rather than a scan.
"""

from __future__ import annotations

import bisect
import json
import math
from collections.abc import Iterator
from datetime import date, datetime, time, timedelta
from decimal import Decimal
from typing import IO, Any, TypedDict

from agentchat.text import storable

MARK_EVERY = 1_000
# One encoder for every line: json.dumps with options builds a new one per call, half the cost of encoding a short row.
LINE = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"))


class Part(TypedDict, total=False):
    name: str
    offset: int
    count: int
    first: int
    last: int
    marks: list[list[int]]  # [number, offset] of every MARK_EVERY-th unit
    columns: list[str]
    header_row: int


def plain(value: Any) -> Any:
    """A cell as JSON can hold it: dates as ISO text, decimals as floats, NaN and infinities as text."""
    if value is None or isinstance(value, bool | int | str):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else str(value)
    if isinstance(value, datetime) and value.time() == time(0):
        return value.date().isoformat()  # spreadsheets keep dates as midnight datetimes
    if isinstance(value, datetime | date | time):
        return value.isoformat()
    if isinstance(value, Decimal):
        return plain(float(value))
    if isinstance(value, timedelta):
        return str(value)
    return str(value)


class ContentWriter:
    def __init__(self, out: IO[bytes]):
        self.out = out
        self.offset = 0
        self.parts: list[Part] = []

    def start_part(self, name: str, **info: Any) -> Part:
        part: Part = {"name": name, "offset": self.offset, "count": 0, "first": 0, "last": 0, "marks": [], **info}
        self.parts.append(part)
        return part

    def add(self, number: int, value: Any) -> None:
        part = self.parts[-1]
        if part["count"] % MARK_EVERY == 0:
            part["marks"].append([number, self.offset])
        # A file may hold half a UTF-16 pair (a JSON escape, a PDF's broken font map), which UTF-8 cannot encode.
        line = storable(LINE.encode([number, value])).encode() + b"\n"
        self.out.write(line)
        self.offset += len(line)
        part["count"] += 1
        part["first"] = part["first"] or number
        part["last"] = number

    def index(self) -> dict[str, Any]:
        return {"parts": self.parts}


class ContentReader:
    def __init__(self, source: IO[bytes], index: dict[str, Any]):
        self.source = source
        self.parts: list[Part] = index.get("parts", [])

    def units(self, part: Part, start: int = 1, end: int | None = None) -> Iterator[tuple[int, Any]]:
        """(number, value) of the part's units numbered from `start` to `end` (inclusive), in order."""
        if part["count"] == 0:
            return
        marks = part["marks"]
        at = max(bisect.bisect_right([number for number, _ in marks], start) - 1, 0)
        self.source.seek(marks[at][1])
        seen = at * MARK_EVERY
        while seen < part["count"]:
            line = self.source.readline()
            if not line:
                return
            seen += 1
            number, value = json.loads(line)
            if number < start:
                continue
            if end is not None and number > end:
                return
            yield number, value
