"""Which MCP servers the agent may use: a JSON list in MCP_SERVERS_FILE, or inline in MCP_SERVERS.

    [{"name": "files", "command": ["npx", "-y", "@modelcontextprotocol/server-filesystem", "/srv/share"]},
     {"name": "tickets", "url": "https://tickets.internal/mcp",
      "headers": {"Authorization": "Bearer ${TICKETS_TOKEN}"}, "identity_secret_env": "TICKETS_IDENTITY_SECRET"}]

A server is started here (`command`, over stdio) or reached at a `url` (streamable HTTP). Secrets never sit in
the list: a value of `env` or `headers` may name environment variables as `${NAME}`, read at start-up.
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
    ENV_NAME,
    HEADER_NAME,
    check_env_name,
    check_header,
    check_permission,
    from_settings,
    identity_secret,
    parse_entries,
)

SERVER_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_]{0,31}$")
ENV_REFERENCE = re.compile(r"\$\{([^{}]*)\}")
# Headers the MCP transport sets itself.
TRANSPORT_HEADERS = {"host", "content-type", "content-length", "connection", "accept", "last-event-id"}
DEFAULT_TIMEOUT = 20.0
DEFAULT_START_TIMEOUT = 15.0


class ServerSpec(BaseModel):
    """One entry of the list, as written. Unknown keys are errors, so a typo never goes unnoticed."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(description="Short name; the server's tools are called <name>__<tool>.")
    command: list[str] | None = Field(None, min_length=1, description="Start the server here, talking over stdio.")
    env: dict[str, str] = Field(default_factory=dict, description="Environment variables of a started server.")
    cwd: str | None = Field(None, description="The folder a started server runs in (default: the list's folder).")
    url: str | None = Field(None, description="Reach the server here, over streamable HTTP.")
    headers: dict[str, str] = Field(default_factory=dict, description="Sent with every request to a url server.")
    identity: bool | None = Field(None, description="Send the user's identity token (default: for a url server).")
    identity_secret_env: str | None = Field(None, description="Environment variable holding the identity secret.")
    identity_header: str = DEFAULT_IDENTITY_HEADER
    timeout: float = Field(DEFAULT_TIMEOUT, gt=0, le=300, description="Seconds a call may take.")
    start_timeout: float = Field(DEFAULT_START_TIMEOUT, gt=0, le=300, description="Seconds a start may take.")
    permission: str | None = Field(None, description="A Django permission needed to see and use these tools.")
    allow: list[str] | None = Field(None, description="Only these tools of the server are offered (default: all).")
    safe: list[str] = Field(default_factory=list, description="Tools that run without asking.")
    confirm: list[str] = Field(default_factory=list, description="Tools that always ask first.")

    _env_name = field_validator("identity_secret_env")(check_env_name)
    _header = field_validator("identity_header")(check_header)
    _permission = field_validator("permission")(check_permission)

    @field_validator("name")
    @classmethod
    def _name(cls, value: str) -> str:
        if not SERVER_NAME.match(value):
            raise ValueError("must start with a letter and hold at most 32 letters, digits or '_'")
        return value

    @field_validator("url")
    @classmethod
    def _url(cls, value: str | None) -> str | None:
        if value is None:
            return value
        parts = urlsplit(value)
        if parts.scheme not in {"http", "https"} or not parts.hostname:
            raise ValueError("must be an http:// or https:// URL with a host")
        if parts.fragment or parts.username or parts.password:
            raise ValueError("must have no fragment or credentials (put a token in headers)")
        return value

    @field_validator("env")
    @classmethod
    def _env(cls, value: dict[str, str]) -> dict[str, str]:
        for name in value:
            check_env_name(name)
        return value

    @field_validator("headers")
    @classmethod
    def _headers(cls, value: dict[str, str]) -> dict[str, str]:
        for name in value:
            if not HEADER_NAME.match(name) or name.lower() in TRANSPORT_HEADERS or name.lower().startswith("mcp-"):
                raise ValueError(f"{name!r} is not a header that may be set here")
        return value


@dataclass(frozen=True)
class McpServer:
    """A configured server with its secrets read from the environment (kept out of repr and logs)."""

    name: str
    timeout: float
    start_timeout: float
    command: tuple[str, ...] = ()
    env: dict[str, str] = field(default_factory=dict, repr=False)
    cwd: str | None = None
    url: str | None = None
    headers: dict[str, str] = field(default_factory=dict, repr=False)
    identity: bool = False
    identity_secret: str = field(default="", repr=False)
    identity_header: str = DEFAULT_IDENTITY_HEADER
    permission: str | None = None
    allow: frozenset[str] | None = None
    safe: frozenset[str] = frozenset()
    confirm: frozenset[str] = frozenset()
    label: str = ""

    @property
    def transport(self) -> str:
        return "stdio" if self.command else "streamable HTTP"

    @property
    def where(self) -> str:
        """The command or URL, for people: the admin and the log."""
        return " ".join(self.command) if self.command else str(self.url)

    def __str__(self) -> str:
        return self.label or self.name


def _expand(values: dict[str, str], *, key: str, label: str, environ: Mapping[str, str]) -> dict[str, str]:
    """`values` with each `${NAME}` replaced by that environment variable, which must be set."""

    def value_of(match: re.Match[str], where: str) -> str:
        name = match.group(1)
        if not ENV_NAME.match(name):
            raise ImproperlyConfigured(f"{label}: {where}: ${{{name}}} does not name an environment variable.")
        if name not in environ:
            raise ImproperlyConfigured(f"{label}: {where}: the environment variable {name} is not set.")
        return environ[name]

    return {
        name: ENV_REFERENCE.sub(lambda match, where=f"{key}.{name}": value_of(match, where), value)
        for name, value in values.items()
    }


def _check_transport(spec: ServerSpec, label: str) -> None:
    if spec.command is None and spec.url is None:
        raise ImproperlyConfigured(
            f"{label}: give a command (to start it here, over stdio) or a url (streamable HTTP)."
        )
    if spec.command is not None and spec.url is not None:
        raise ImproperlyConfigured(f"{label}: give command or url, not both.")
    for key, needs in {"env": "command", "cwd": "command", "headers": "url", "identity_header": "url"}.items():
        if key in spec.model_fields_set and getattr(spec, needs) is None:
            raise ImproperlyConfigured(f"{label}: {key}: only for a server with a {needs}.")
    if spec.command is not None and not spec.command[0].strip():
        raise ImproperlyConfigured(f"{label}: command: the program to run is empty.")


def _check_tool_lists(spec: ServerSpec, label: str) -> None:
    both = sorted(set(spec.safe) & set(spec.confirm))
    if both:
        raise ImproperlyConfigured(f"{label}: {', '.join(both)} cannot be both safe and in need of confirmation.")


def _resolve(spec: ServerSpec, *, label: str, base_dir: Path, environ: Mapping[str, str]) -> McpServer:
    _check_transport(spec, label)
    _check_tool_lists(spec, label)
    identity = spec.identity if spec.identity is not None else spec.url is not None
    secret = ""
    if identity:
        if spec.identity_secret_env is None:
            raise ImproperlyConfigured(
                f"{label}: identity_secret_env: required to sign the identity token each call carries "
                '(or set "identity": false).'
            )
        secret = identity_secret(spec.identity_secret_env, label=label, environ=environ)
    command: tuple[str, ...] = ()
    cwd = None
    if spec.command is not None:
        folder = (base_dir / Path(spec.cwd).expanduser()).resolve() if spec.cwd else base_dir
        if not folder.is_dir():
            raise ImproperlyConfigured(f"{label}: cwd: {folder} is not a folder.")
        cwd = str(folder)
        program = spec.command[0]
        # A program given by a relative path is found from the server's folder, as the rest of its command line.
        if "/" in program and not Path(program).is_absolute():
            program = str(folder / program)
        command = (program, *spec.command[1:])
    return McpServer(
        name=spec.name,
        timeout=spec.timeout,
        start_timeout=spec.start_timeout,
        command=command,
        env=_expand(spec.env, key="env", label=label, environ=environ),
        cwd=cwd,
        url=spec.url,
        headers=_expand(spec.headers, key="headers", label=label, environ=environ),
        identity=identity,
        identity_secret=secret,
        identity_header=spec.identity_header,
        permission=spec.permission,
        allow=frozenset(spec.allow) if spec.allow is not None else None,
        safe=frozenset(spec.safe),
        confirm=frozenset(spec.confirm),
        label=label,
    )


def parse_servers(
    raw: str | list[Any], *, variable: str, base_dir: Path, environ: Mapping[str, str] | None = None
) -> list[McpServer]:
    """The servers of a JSON list; a started server runs in `base_dir` unless its `cwd` says otherwise."""
    environ = os.environ if environ is None else environ
    entries = parse_entries(raw, variable=variable, model=ServerSpec, kind="server")
    return [_resolve(spec, label=label, base_dir=base_dir, environ=environ) for spec, label in entries]


def servers_from_settings() -> list[McpServer]:
    return from_settings("MCP_SERVERS_FILE", "MCP_SERVERS", parse_servers)
