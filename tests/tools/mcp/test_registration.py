"""A server's tools in the registry: names, descriptions, schemas, who may use them, and which ask first."""

from __future__ import annotations

import logging
import sys
import time

import pytest
from asgiref.sync import sync_to_async
from django.core.exceptions import ImproperlyConfigured

from tests.tools.dashboards.conftest import grant
from tools.mcp.config import parse_servers
from tools.mcp.toolset import ServerTools, register_servers
from tools.registry import Tool, ToolArgs, ToolRegistry, ToolSource

from .conftest import PERMISSION, ROOT, stdio_entry, toolset_of

ITEMS_TOOLS = [
    "items__find_items",
    "items__get_item",
    "items__delete_item",
    "items__rename_item",
    "items__fail",
    "items__sleep",
    "items__crash",
    "items__quit",
    "items__add_tool",
    "items__whoami",
    "items__picture",
]


def test_each_tool_is_registered_as_server__tool_with_the_server_s_description(items):
    assert [tool.name for tool in items.registry.all()] == ITEMS_TOOLS
    tool = items.registry.get("items__get_item")
    assert tool.description == "(from MCP server 'items') One item by its id and kind."
    assert tool.source == ToolSource("mcp", "items")
    assert tool.permission == PERMISSION and tool.timeout == 1 + 5
    assert items.names == tuple(ITEMS_TOOLS)


def test_the_arguments_are_the_server_s_input_schema(items):
    parameters = items.registry.get("items__get_item").schema()["parameters"]
    assert parameters["required"] == ["id", "kind"] and parameters["additionalProperties"] is False
    assert parameters["properties"]["id"]["type"] == "integer" and parameters["properties"]["id"]["minimum"] == 1
    assert parameters["properties"]["kind"]["enum"] == ["book", "film"]


def test_only_who_holds_the_permission_is_offered_the_tools(items, alice, bob):
    alice = grant(alice, PERMISSION)
    assert [tool.name for tool in items.registry.permitted(alice)] == ITEMS_TOOLS
    assert items.registry.permitted(bob) == []
    assert items.registry.permitted(bob) == []


def test_what_asks_first_follows_the_server_s_annotations(items):
    asks = {tool.name for tool in items.registry.all() if tool.requires_confirmation}
    # delete_item is destructive; rename_item says nothing, so it is not known to only read.
    assert asks == {"items__delete_item", "items__rename_item"}


def entry_of(items, registry: ToolRegistry | None = None, **overrides) -> ServerTools:
    """Another entry for the shared server, which it has listed already: nothing else is started."""
    [server] = parse_servers([stdio_entry(**overrides)], variable="MCP_SERVERS", base_dir=ROOT)
    [toolset] = register_servers(registry or ToolRegistry(), [server])
    toolset.connection.listing = items.connection.listing
    return toolset


def test_the_entry_decides_over_the_annotations(items):
    toolset = entry_of(items, safe=["rename_item"], confirm=["find_items"], allow=["find_items", "rename_item"])
    asks = {tool.name: tool.requires_confirmation for tool in toolset.registry.all()}
    assert asks == {"items__find_items": True, "items__rename_item": False}  # only the allowed ones


def test_tools_the_entry_names_but_the_server_lacks_are_logged(items, caplog):
    with caplog.at_level(logging.WARNING):
        assert entry_of(items, allow=["find_items", "nope"], safe=["gone"]).registry.has("items__find_items")
    assert "MCP_SERVERS: server 'items': allow names tools the server does not list: nope" in caplog.text
    assert "MCP_SERVERS: server 'items': safe names tools the server does not list: gone" in caplog.text


def test_a_name_taken_already_leaves_the_server_s_tool_out(items, caplog):
    registry = ToolRegistry()
    taken = registry.register(Tool(name="items__fail", description="Mine.", args_model=ToolArgs, func=print))
    toolset = entry_of(items, allow=["fail", "find_items"], registry=registry)
    with caplog.at_level(logging.ERROR):
        assert [tool.name for tool in registry.all()] == ["items__fail", "items__find_items"]
    assert registry.get("items__fail") is taken and toolset.names == ("items__find_items",)
    assert "MCP_SERVERS: server 'items': A tool named 'items__fail' is registered already." in caplog.text


def test_safe_and_confirm_may_not_name_the_same_tool():
    with pytest.raises(ImproperlyConfigured, match="fail cannot be both safe and in need of confirmation"):
        toolset_of(stdio_entry(safe=["fail"], confirm=["fail"]))


async def test_a_first_lookup_on_an_event_loop_waits_and_a_retry_does_not(monkeypatch, caplog):
    """The background worker looks tools up on an event loop: its first lookup must find them. A server that hangs
    must not hold up a loop at every lookup after that."""
    monkeypatch.setattr("tools.mcp.toolset.RETRY_AFTER", 0)
    hangs = stdio_entry(command=[sys.executable, "-c", "import sys; sys.stdin.read()"], start_timeout=0.5)
    [toolset] = register_servers(ToolRegistry(), parse_servers([hangs], variable="MCP_SERVERS", base_dir=ROOT))
    try:
        started = time.monotonic()
        with caplog.at_level(logging.ERROR):
            assert toolset.registry.find("items__find_items") is None
        assert time.monotonic() - started >= 0.5
        assert "MCP server 'items' is not available: it did not start within 0.5 s." in caplog.text

        started = time.monotonic()
        assert toolset.registry.find("items__find_items") is None
        assert time.monotonic() - started < 0.2
    finally:
        await sync_to_async(toolset.connection.stop)()
