"""Which REST services the agent may call: a JSON list in HTTP_SERVICES_FILE, or inline in HTTP_SERVICES.

    [{"name": "billing", "base_url": "https://billing.internal/api", "openapi": "billing.yaml",
      "token_env": "BILLING_TOKEN", "identity_secret_env": "BILLING_IDENTITY_SECRET"}]

Secrets never sit in the list: it names the environment variables that hold them.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from django.core.exceptions import ImproperlyConfigured
from pydantic import BaseModel, ConfigDict, Field, field_validator

from tools.configured import (
    DEFAULT_IDENTITY_HEADER,
    check_env_name,
    check_header,
    check_permission,
    from_settings,
    identity_secret,
    parse_entries,
)

SERVICE_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_-]{0,31}$")
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

    _env_name = field_validator("token_env", "identity_secret_env")(check_env_name)
    _header = field_validator("identity_header")(check_header)
    _permission = field_validator("permission")(check_permission)


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


def _resolve(spec: ServiceSpec, *, label: str, base_dir: Path, environ: Mapping[str, str]) -> Service:
    secret = identity_secret(spec.identity_secret_env, label=label, environ=environ)
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
    entries = parse_entries(raw, variable=variable, model=ServiceSpec, kind="service")
    return [_resolve(spec, label=label, base_dir=base_dir, environ=environ) for spec, label in entries]


def services_from_settings() -> list[Service]:
    return from_settings("HTTP_SERVICES_FILE", "HTTP_SERVICES", parse_services)
