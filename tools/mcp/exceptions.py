"""What goes wrong when the agent calls an MCP server. Each message is a sentence the model (and the person) reads."""

from __future__ import annotations


class McpCallError(Exception):
    """A call that did not succeed: the server is down, stopped, too slow, refused, or its tool failed.
    It becomes the tool's error."""


class ServerUnavailable(McpCallError):
    """The server could not be started or reached."""
