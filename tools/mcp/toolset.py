"""Each tool an MCP server lists as a Tool: `<server>__<tool>`, kept in step with the server's list.

A server's tools are registered at the first lookup of the registry (the first run, `/api/agent/tools`, …), not at
start-up: that lookup starts the server (or connects to it) and waits for its list, at most its `start_timeout`. A
server that cannot be started then has no tools for now; a lookup RETRY_AFTER seconds later tries again (and waits
for the answer unless it is made on an event loop, which a server that hangs must not hold up again and again).
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import logging
import re
import threading
import time
from typing import Any

from mcp import types
from pydantic import BaseModel

from tools.identity import identity_token
from tools.registry import Tool, ToolContext, ToolRegistry, ToolSource
from tools.schemas import SchemaReader, UnsupportedSchema

from .config import McpServer
from .connection import Connection
from .exceptions import McpCallError

logger = logging.getLogger(__name__)

# The tool's own deadline is a backstop behind the call's: the call's clearer error should win.
TIMEOUT_MARGIN = 5.0
RETRY_AFTER = 30.0


def tool_name(server: str, tool: str) -> str:
    """`<server>__<tool>` in the characters (and length) every provider accepts."""
    return re.sub(r"[^a-zA-Z0-9_-]", "_", f"{server}__{tool}")[:64]


def needs_confirmation(server: McpServer, listed: types.Tool) -> bool:
    """In `confirm`: yes; in `safe`: no; otherwise yes, unless the server says the tool only reads (`readOnlyHint`)."""
    if listed.name in server.confirm:
        return True
    if listed.name in server.safe:
        return False
    hints = listed.annotations
    return hints is None or hints.read_only_hint is not True or hints.destructive_hint is True


def _size(data: str) -> int | None:
    try:
        return len(base64.b64decode(data, validate=True))
    except (binascii.Error, ValueError):
        return None


def _attachment(block: types.ContentBlock) -> dict[str, Any]:
    """What the model is told of content that is not text: its kind, type and size (bytes)."""
    if isinstance(block, types.ImageContent | types.AudioContent):
        return {"type": block.type, "mime_type": block.mime_type, "size": _size(block.data)}
    if isinstance(block, types.EmbeddedResource):
        resource = block.resource
        found: dict[str, Any] = {"type": "resource", "uri": str(resource.uri), "mime_type": resource.mime_type}
        if isinstance(resource, types.TextResourceContents):
            return {**found, "size": len(resource.text.encode()), "text": resource.text}
        return {**found, "size": _size(resource.blob)}
    if isinstance(block, types.ResourceLink):
        link = {"type": "resource_link", "uri": str(block.uri), "name": block.name, "mime_type": block.mime_type}
        return {**link, "size": block.size}
    return {"type": getattr(block, "type", type(block).__name__)}


def tool_output(result: types.CallToolResult, *, notice: str = "") -> Any:
    """The result as the tool's output: its structured content, or else its text; with `attachments` (images,
    resources) and a `notice` (a restart), under `result`. An error result is raised, for the model to read."""
    texts = [block.text for block in result.content if isinstance(block, types.TextContent)]
    text = "\n\n".join(texts)
    if result.is_error:
        raise McpCallError(text or "the tool failed without saying why.")
    attachments = [_attachment(block) for block in result.content if not isinstance(block, types.TextContent)]
    value = result.structured_content if result.structured_content is not None else text
    if not attachments and not notice:
        return value
    output: dict[str, Any] = {"result": value}
    if attachments:
        output["attachments"] = attachments
    if notice:
        output["notice"] = notice
    return output


def make_tool(server: McpServer, connection: Connection, listed: types.Tool) -> Tool:
    name = tool_name(server.name, listed.name)
    args_model = SchemaReader(listed.input_schema).arguments_model(listed.input_schema, model_name=name)

    async def call(args: BaseModel, ctx: ToolContext) -> Any:
        identity = None
        if server.identity:
            if ctx.user is None or not getattr(ctx.user, "is_authenticated", False):
                raise McpCallError(f"MCP server '{server.name}' is only called on behalf of a signed-in user.")
            identity = identity_token(ctx.user, server)
        arguments = args.model_dump(mode="json", by_alias=True, exclude_none=True)
        result, restarted = await connection.call(listed.name, arguments, identity=identity)
        return tool_output(result, notice=connection.restart_notice if restarted else "")

    call.__name__ = call.__qualname__ = name
    about = listed.description or listed.title or listed.name
    return Tool(
        name=name,
        description=f"(from MCP server '{server.name}') {about}",
        args_model=args_model,
        func=call,
        requires_confirmation=needs_confirmation(server, listed),
        permission=server.permission,
        timeout=server.timeout + TIMEOUT_MARGIN,
        source=ToolSource("mcp", server.name),
    )


def build_tools(server: McpServer, connection: Connection, listing: list[types.Tool]) -> list[Tool]:
    """The tools of a listing that the server's entry lets through; one that cannot be a tool is logged."""
    offered = [listed for listed in listing if server.allow is None or listed.name in server.allow]
    named = {listed.name for listed in listing}
    for key in ("allow", "safe", "confirm"):
        unknown = sorted((getattr(server, key) or frozenset()) - named)
        if unknown:
            logger.warning("%s: %s names tools the server does not list: %s", server, key, ", ".join(unknown))
    tools: dict[str, Tool] = {}
    for listed in offered:
        try:
            tool = make_tool(server, connection, listed)
        except UnsupportedSchema as exc:
            logger.warning("%s: the tool %s is left out: %s", server, listed.name, exc)
            continue
        if tool.name in tools:
            logger.warning("%s: the tool %s is left out: its name is taken as %s", server, listed.name, tool.name)
            continue
        tools[tool.name] = tool
    return list(tools.values())


def _on_event_loop() -> bool:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


class ServerTools:
    """A server's tools in the registry: added at the first lookup, replaced whenever the server lists them again.

    Registered as a source of the registry, it is called at lookups until the server's tools are known.
    """

    def __init__(self, registry: ToolRegistry, server: McpServer):
        self.registry = registry
        self.server = server
        self.connection = Connection(server, on_listing=self._listed)
        self._lock = threading.Lock()
        self._registered: tuple[str, ...] | None = None
        self._failed_at: float | None = None

    def __repr__(self) -> str:
        return f"<MCP server {self.server.name}: {self.server.where}>"

    @property
    def names(self) -> tuple[str, ...]:
        return self._registered or ()

    def __call__(self) -> list[Tool] | None:
        if self.connection.listing is None:
            if self._failed_at is not None:
                if time.monotonic() - self._failed_at < RETRY_AFTER:
                    return None
                if _on_event_loop():
                    # A retry never holds up an event loop: it goes on meanwhile, and a later lookup finds the tools.
                    self._failed_at = time.monotonic()
                    self.connection.start()
                    return None
            started = self.connection.start()
            try:
                started.result(self.server.start_timeout + 1)
            except (McpCallError, TimeoutError) as exc:
                self._failed_at = time.monotonic()
                why = str(exc) or "it did not start in time."
                logger.error("%s: %s Its tools are left out (trying again in %g s).", self.server, why, RETRY_AFTER)
                return None
        with self._lock:
            self._register(self.connection.listing or [])
        return []

    def _listed(self, listing: list[types.Tool]) -> None:
        with self._lock:
            if self._registered is not None:
                self._register(listing)

    def _register(self, listing: list[types.Tool]) -> None:
        tools = build_tools(self.server, self.connection, listing)
        refused = self.registry.replace(self._registered or (), tools)
        for problem in refused.values():
            logger.error("%s: %s", self.server, problem)
        self._registered = tuple(tool.name for tool in tools if tool.name not in refused)


def register_servers(registry: ToolRegistry, servers: list[McpServer]) -> list[ServerTools]:
    """Each server's tools, to be listed at the first lookup of the registry."""
    toolsets = [ServerTools(registry, server) for server in servers]
    for toolset in toolsets:
        registry.add_source(toolset)
    return toolsets
