"""What the toolsets configured by a JSON list share: the list in a file (`<X>_FILE`) or inline (`<X>`), read
entry by entry, each error a start-up error naming the variable, the entry and the field.

Secrets never sit in a list: it names the environment variables that hold them.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, TypeVar

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from pydantic import BaseModel, ValidationError

ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
HEADER_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9-]*$")
PERMISSION_NAME = re.compile(r"^[a-z_][a-z0-9_]*\.[A-Za-z0-9_]+$")
# Headers the call itself sets: a configured header may not replace them.
RESERVED_HEADERS = {"authorization", "host", "content-type", "content-length", "cookie", "connection", "accept"}
MIN_SECRET_LENGTH = 32
DEFAULT_IDENTITY_HEADER = "X-User-Token"

Spec = TypeVar("Spec", bound=BaseModel)
T = TypeVar("T")


def from_settings(file_variable: str, inline_variable: str, parse: Callable[..., list[T]]) -> list[T]:
    """What `parse(raw, variable=…, base_dir=…)` makes of the list in the file `file_variable` names (relative paths
    start from its folder), or inline in `inline_variable` (from the project's folder); nothing when neither is set."""
    path, inline = getattr(settings, file_variable), getattr(settings, inline_variable)
    if path and inline:
        raise ImproperlyConfigured(f"Set {file_variable} or {inline_variable}, not both.")
    if path:
        file = Path(path).expanduser()
        try:
            text = file.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            reason = exc.strerror if isinstance(exc, OSError) else "it is not UTF-8 text"
            raise ImproperlyConfigured(f"{file_variable}: cannot read {path}: {reason}.") from None
        return parse(text, variable=file_variable, base_dir=file.resolve().parent)
    if inline:
        return parse(inline, variable=inline_variable, base_dir=Path(settings.BASE_DIR))
    return []


def describe(error: ValidationError) -> str:
    problems = []
    for item in error.errors(include_url=False):
        where = ".".join(str(part) for part in item["loc"]) or "the entry"
        message = item["msg"].removeprefix("Value error, ")
        problems.append(f"{where}: {message}")
    return "; ".join(problems)


def parse_entries(raw: str | list[Any], *, variable: str, model: type[Spec], kind: str) -> list[tuple[Spec, str]]:
    """Each entry of a JSON list checked by `model`, with the label its later errors start with
    ("HTTP_SERVICES: service 'billing'"); `kind` names an entry in the messages."""
    if isinstance(raw, str):
        try:
            raw = json.loads(raw)
        except json.JSONDecodeError as exc:
            raise ImproperlyConfigured(
                f"{variable} is not valid JSON: {exc.msg} (line {exc.lineno}, column {exc.colno})."
            ) from None
    if not isinstance(raw, list):
        raise ImproperlyConfigured(f"{variable} must be a JSON list of {kind}s.")
    entries: list[tuple[Spec, str]] = []
    names: set[str] = set()
    for index, entry in enumerate(raw, start=1):
        name = entry.get("name") if isinstance(entry, dict) else None
        label = f"{variable}: {kind} {name!r}" if isinstance(name, str) and name else f"{variable}: {kind} #{index}"
        try:
            spec = model.model_validate(entry)
        except ValidationError as exc:
            raise ImproperlyConfigured(f"{label}: {describe(exc)}.") from None
        if name in names:
            raise ImproperlyConfigured(f"{label}: the name is used by another {kind}.")
        names.add(name)
        entries.append((spec, label))
    return entries


def identity_secret(variable: str, *, label: str, environ: Mapping[str, str]) -> str:
    """The secret that signs a toolset's identity tokens, from the environment variable the entry names."""
    secret = environ.get(variable, "").strip()
    if not secret:
        raise ImproperlyConfigured(f"{label}: the environment variable {variable} is not set.")
    if len(secret) < MIN_SECRET_LENGTH:
        raise ImproperlyConfigured(f"{label}: {variable} must be at least {MIN_SECRET_LENGTH} characters long.")
    return secret


def check_env_name(value: str) -> str:
    if not ENV_NAME.match(value):
        raise ValueError("must be the name of an environment variable")
    return value


def check_header(value: str) -> str:
    if not HEADER_NAME.match(value) or value.lower() in RESERVED_HEADERS:
        raise ValueError("must be a header name of its own, such as X-User-Token")
    return value


def check_permission(value: str | None) -> str | None:
    if value is not None and not PERMISSION_NAME.match(value):
        raise ValueError("must be a Django permission written app_label.codename")
    return value
