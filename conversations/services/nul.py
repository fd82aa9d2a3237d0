"""Text made storable everywhere."""

from __future__ import annotations

from typing import Any


def without_nul(value: Any) -> Any:
    """PostgreSQL keeps no NUL character in text or jsonb; a file may well hold some."""
    if isinstance(value, str):
        return value.replace("\x00", "")
    if isinstance(value, list):
        return [without_nul(item) for item in value]
    if isinstance(value, dict):
        return {without_nul(key): without_nul(item) for key, item in value.items()}
    return value
