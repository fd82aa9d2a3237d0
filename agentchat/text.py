"""Text as every database stores it, whoever wrote it: a model, a tool's service, a file, a client; and how deep a
JSON value nests."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any, Literal

# Half of a UTF-16 pair on its own, which a JSON \u escape can carry: not a character, and no database stores it.
SURROGATE = re.compile("[\ud800-\udfff]")
REPLACEMENT = "\ufffd"


def storable(value: Any) -> Any:
    """`value`, a string or JSON made of lists and dicts, as every database stores it: without the NUL character
    (PostgreSQL keeps none in text or jsonb), and with each lone surrogate replaced by U+FFFD."""
    if isinstance(value, str):
        if value.isascii():
            return value.replace("\x00", "") if "\x00" in value else value
        return SURROGATE.sub(REPLACEMENT, value.replace("\x00", ""))
    if isinstance(value, list):
        return [storable(item) for item in value]
    if isinstance(value, dict):
        return {storable(key): storable(item) for key, item in value.items()}
    return value


def unstorable(value: Any) -> Literal["nul", "surrogate"] | None:
    """The first thing in a JSON value's strings and keys that no database stores, for a client to be told."""
    for item, _depth in walk(value):
        if isinstance(item, str):
            if "\x00" in item:
                return "nul"
            if not item.isascii() and SURROGATE.search(item):
                return "surrogate"
    return None


def nesting(value: Any) -> int:
    """How deep objects and arrays nest in a JSON value."""
    return max((depth for item, depth in walk(value) if isinstance(item, dict | list)), default=0)


def walk(value: Any) -> Iterator[tuple[Any, int]]:
    """Every value and key in a JSON value, with the depth it sits at (without recursion: the value may be very
    deep)."""
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        yield item, depth
        if isinstance(item, dict | list):
            children = (*item, *item.values()) if isinstance(item, dict) else item
            stack.extend((child, depth + 1) for child in children)
