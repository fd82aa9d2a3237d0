"""Which REST services the agent may call: a JSON list in HTTP_SERVICES_FILE, or inline in HTTP_SERVICES.

    [{"name": "billing", "base_url": "https://billing.internal/api", "openapi": "billing.yaml",
      "token_env": "BILLING_TOKEN", "identity_secret_env": "BILLING_IDENTITY_SECRET"}]

Secrets never sit in the list: it names the environment variables that hold them.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

SERVICE_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_-]{0,31}$")
ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
HEADER_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9-]*$")
PERMISSION_NAME = re.compile(r"^[a-z_][a-z0-9_]*\.[A-Za-z0-9_]+$")
# Headers the call itself sets: a service's identity header may not replace them.
RESERVED_HEADERS = {"authorization", "host", "content-type", "content-length", "cookie", "connection", "accept"}
MIN_SECRET_LENGTH = 32
DEFAULT_IDENTITY_HEADER = "X-User-Token"
DEFAULT_TIMEOUT = 10.0


def _is_url(value: str) -> bool:
    return urlsplit(value).scheme in {"http", "https"}


class ServiceSpec(BaseModel):
    """One entry of the list, as written. Unknown keys are errors, so a typo never goes unnoticed."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(description="Short name; the service's tools are called <name>_<operationId>.")
    base_url: str = Field(description="Every call goes under this http(s) URL and nowhere else.")
    openapi: str = Field(description="The OpenAPI 3 document: a file path, or an http(s) URL fetched when needed.")
    token_env: str = Field(description="Environment variable holding the agent's service token.")
    identity_secret_env: str = Field(description="Environment variable holding the secret that signs identities.")
    identity_header: str = DEFAULT_IDENTITY_HEADER
    timeout: float = Field(DEFAULT_TIMEOUT, gt=0, le=300)
    operations: list[str] | None = Field(None, description="Only these operations become tools (default: all).")
    safe_operations: list[str] = Field(default_factory=list, description="Non-GET operations run unasked.")
    confirm_operations: list[str] = Field(default_factory=list, description="GET operations that ask first.")
    permission: str | None = Field(None, description="A Django permission needed to see and use these tools.")

    @field_validator("name")
    @classmethod
    def _name(cls, value: str) -> str:
        if not SERVICE_NAME.match(value):
            raise ValueError("must start with a letter and hold at most 32 letters, digits, '_' or '-'")
        return value

    @field_validator("base_url")
    @classmethod
    def _base_url(cls, value: str) -> str:
        parts = urlsplit(value)
        if parts.scheme not in {"http", "https"} or not parts.hostname:
            raise ValueError("must be an http:// or https:// URL with a host")
        if parts.query or parts.fragment or parts.username or parts.password:
            raise ValueError("must have no query, fragment or credentials")
        return value.rstrip("/")

    @field_validator("token_env", "identity_secret_env")
    @classmethod
    def _env_name(cls, value: str) -> str:
        if not ENV_NAME.match(value):
            raise ValueError("must be the name of an environment variable")
        return value

    @field_validator("identity_header")
    @classmethod
    def _header(cls, value: str) -> str:
        if not HEADER_NAME.match(value) or value.lower() in RESERVED_HEADERS:
            raise ValueError("must be a header name of its own, such as X-User-Token")
        return value

    @field_validator("permission")
    @classmethod
    def _permission(cls, value: str | None) -> str | None:
        if value is not None and not PERMISSION_NAME.match(value):
            raise ValueError("must be a Django permission written app_label.codename")
        return value


@dataclass(frozen=True)
class Service:
    """A configured service with its secrets read from the environment (kept out of repr and logs)."""

    name: str
    base_url: str
    openapi: str
    timeout: float
    token_env: str
    identity_secret_env: str
    identity_secret: str = field(repr=False)
    token: str | None = field(default=None, repr=False)
    identity_header: str = DEFAULT_IDENTITY_HEADER
    operations: frozenset[str] | None = None
    safe_operations: frozenset[str] = frozenset()
    confirm_operations: frozenset[str] = frozenset()
    permission: str | None = None
    label: str = ""

    @property
    def openapi_is_url(self) -> bool:
        return _is_url(self.openapi)

    def __str__(self) -> str:
        return self.label or self.name


def _describe(error: ValidationError) -> str:
    problems = []
    for item in error.errors(include_url=False):
        where = ".".join(str(part) for part in item["loc"]) or "the entry"
        message = item["msg"].removeprefix("Value error, ")
        problems.append(f"{where}: {message}")
    return "; ".join(problems)


def _resolve(spec: ServiceSpec, *, label: str, base_dir: Path, environ: Mapping[str, str]) -> Service:
    secret = environ.get(spec.identity_secret_env, "").strip()
    if not secret:
        raise ImproperlyConfigured(f"{label}: the environment variable {spec.identity_secret_env} is not set.")
    if len(secret) < MIN_SECRET_LENGTH:
        raise ImproperlyConfigured(
            f"{label}: {spec.identity_secret_env} must be at least {MIN_SECRET_LENGTH} characters long."
        )
    openapi = spec.openapi.strip()
    if not openapi:
        raise ImproperlyConfigured(f"{label}: openapi is empty.")
    if not _is_url(openapi):
        if urlsplit(openapi).scheme not in {"", "file"} and not Path(openapi).is_absolute():
            raise ImproperlyConfigured(f"{label}: openapi must be a file path or an http(s) URL, got {openapi!r}.")
        openapi = str((base_dir / Path(openapi).expanduser()).resolve())
    return Service(
        name=spec.name,
        base_url=spec.base_url,
        openapi=openapi,
        timeout=spec.timeout,
        token_env=spec.token_env,
        # Missing is allowed at start-up: the token may be one this server issues (/api/auth/service-token/).
        token=environ.get(spec.token_env, "").strip() or None,
        identity_secret_env=spec.identity_secret_env,
        identity_secret=secret,
        identity_header=spec.identity_header,
        operations=frozenset(spec.operations) if spec.operations is not None else None,
        safe_operations=frozenset(spec.safe_operations),
        confirm_operations=frozenset(spec.confirm_operations),
        permission=spec.permission,
        label=label,
    )


def parse_services(
    raw: str | list[Any], *, variable: str, base_dir: Path, environ: Mapping[str, str] | None = None
) -> list[Service]:
    """The services of a JSON list; relative openapi paths are relative to `base_dir`."""
    environ = os.environ if environ is None else environ
    if isinstance(raw, str):
        try:
            raw = json.loads(raw)
        except json.JSONDecodeError as exc:
            raise ImproperlyConfigured(
                f"{variable} is not valid JSON: {exc.msg} (line {exc.lineno}, column {exc.colno})."
            ) from None
    if not isinstance(raw, list):
        raise ImproperlyConfigured(f"{variable} must be a JSON list of services.")
    services: list[Service] = []
    for index, entry in enumerate(raw, start=1):
        name = entry.get("name") if isinstance(entry, dict) else None
        label = f"{variable}: service {name!r}" if isinstance(name, str) and name else f"{variable}: service #{index}"
        try:
            spec = ServiceSpec.model_validate(entry)
        except ValidationError as exc:
            raise ImproperlyConfigured(f"{label}: {_describe(exc)}.") from None
        if any(service.name == spec.name for service in services):
            raise ImproperlyConfigured(f"{label}: the name is used by another service.")
        services.append(_resolve(spec, label=label, base_dir=base_dir, environ=environ))
    return services


def services_from_settings() -> list[Service]:
    path, inline = settings.HTTP_SERVICES_FILE, settings.HTTP_SERVICES
    if path and inline:
        raise ImproperlyConfigured("Set HTTP_SERVICES_FILE or HTTP_SERVICES, not both.")
    if path:
        file = Path(path).expanduser()
        try:
            text = file.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            reason = exc.strerror if isinstance(exc, OSError) else "it is not UTF-8 text"
            raise ImproperlyConfigured(f"HTTP_SERVICES_FILE: cannot read {path}: {reason}.") from None
        return parse_services(text, variable="HTTP_SERVICES_FILE", base_dir=file.resolve().parent)
    if inline:
        return parse_services(inline, variable="HTTP_SERVICES", base_dir=Path(settings.BASE_DIR))
    return []
