"""Text as every database stores it, whoever wrote it: a model, a tool's service, a file."""

from __future__ import annotations

import re
from typing import Any

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
