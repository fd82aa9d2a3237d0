"""JSON: parsed whole (the upload limit bounds its size), nesting bounded, shown pretty-printed line by line."""

from __future__ import annotations

import json
from typing import Any

from .content import ContentWriter
from .csvfile import decode
from .exceptions import Unreadable
from .parsed import Parsed, Source, TextBuffer


def depth_of(value: Any, limit: int) -> int:
    """How deeply `value` nests, without recursion; stops counting past `limit`."""
    deepest = 0
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if not isinstance(item, dict | list):
            continue
        deepest = max(deepest, depth)
        if deepest > limit:
            return deepest
        stack.extend((child, depth + 1) for child in (item.values() if isinstance(item, dict) else item))
    return deepest


def _shape(value: Any) -> str:
    if isinstance(value, dict):
        return f"an object with {len(value):,} keys"
    if isinstance(value, list):
        return f"an array of {len(value):,} items"
    return f"a single {type(value).__name__} value"


def parse(source: Source) -> Parsed:
    limits = source.limits
    with open(source.path, "rb") as file:
        raw = file.read()
    text, encoding = decode(raw)
    del raw
    try:
        value = json.loads(text)
    except RecursionError:
        raise Unreadable(f"The JSON nests deeper than {limits.json_depth} levels.") from None
    except json.JSONDecodeError as exc:
        raise Unreadable(
            f"The file starts like JSON but is not valid JSON: {exc.msg} at line {exc.lineno}, column {exc.colno}."
        ) from None
    except ValueError as exc:  # e.g. an integer with more digits than Python converts
        raise Unreadable(f"The JSON cannot be read: {exc}.") from None
    del text
    depth = depth_of(value, limits.json_depth)
    if depth > limits.json_depth:
        raise Unreadable(f"The JSON nests deeper than {limits.json_depth} levels.")
    writer = ContentWriter(source.content)
    writer.start_part("lines")
    buffer = TextBuffer(limits.text_chars)
    pending = ""
    number = 0
    # iterencode with an indent is a generator: the pretty text never has to exist whole in memory.
    for chunk in json.JSONEncoder(indent=2, ensure_ascii=False).iterencode(value):
        pending += chunk
        *lines, pending = pending.split("\n")
        for line in lines:
            number += 1
            writer.add(number, line)
            buffer.add(line + "\n")
    number += 1
    writer.add(number, pending)
    buffer.add(pending)
    meta = {"encoding": encoding, "top": _shape(value), "depth": depth, "lines": number}
    header = f"=== JSON: {_shape(value)}, nesting depth {depth}, {number:,} lines pretty-printed ===\n"
    return Parsed(kind="json", text=header + buffer.text(), meta=meta, index=writer.index())
