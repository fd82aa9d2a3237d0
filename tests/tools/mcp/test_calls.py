"""Calls of a stdio server's tools as the agent makes them: results, errors, the gate, timeouts, a crash, a change."""

from __future__ import annotations

import asyncio
import base64
import time
from dataclasses import replace

import pytest
from asgiref.sync import sync_to_async

from agentchat.agent.calls import NeedsConfirmation, Outcome, ToolAccess, ToolOutcome, call_tool, carry_out
from tests.mcp_server import PIXEL
from tools.mcp.exceptions import McpCallError
from tools.registry import ToolContext, ToolTimeout

from .conftest import run


async def test_text_and_structured_content_become_the_output(items):
    assert await run(items, "items__find_items", {"text": "al"}) == "Alien"
    assert await run(items, "items__get_item", {"id": 1, "kind": "book"}) == {"id": 1, "kind": "book", "title": "Dune"}


async def test_images_and_resources_are_described_not_dropped(items):
    assert await run(items, "items__picture", {}) == {
        "result": "A pixel.",
        "attachments": [
            {"type": "image", "mime_type": "image/png", "size": len(base64.b64decode(PIXEL))},
            {
                "type": "resource",
                "uri": "items://caption",
                "mime_type": "text/plain",
                "size": 22,
                "text": "One transparent pixel.",
            },
        ],
    }


async def test_an_error_result_or_a_raising_tool_is_a_tool_error_the_model_reads(items):
    tool = items.registry.get("items__get_item")
    outcome = await call_tool(tool, tool.validate({"id": 2, "kind": "book"}), ToolContext(user=None))
    assert outcome == ToolOutcome.failed("items__get_item failed: No book 2.")
    assert outcome.content == "Error: items__get_item failed: No book 2."

    tool = items.registry.get("items__fail")
    outcome = await call_tool(tool, tool.validate({}), ToolContext(user=None))
    assert outcome.error == "items__fail failed: MCP server 'items' answered with an error: the item store is locked"


@pytest.mark.parametrize(
    ("args", "problem"),
    [
        ({"id": 1, "kind": "book", "shelf": 3}, "shelf: unknown argument (known: id, kind)"),
        ({"id": "1", "kind": "book"}, 'id: expected a whole number, got "1"'),
        ({"id": 1.0, "kind": "book"}, "id: expected a whole number, got 1.0"),
        ({"id": True, "kind": "book"}, "id: expected a whole number, got true"),
        ({"id": 0, "kind": "book"}, "id: Input should be greater than or equal to 1"),
        ({"id": 1, "kind": "album"}, 'kind: must be one of book, film, not "album"'),
        ({"id": 1}, "kind: required, but missing"),
    ],
)
async def test_arguments_are_checked_strictly_before_any_call(items, args, problem):
    executed = []

    async def execute(tool, valid, call_id):
        executed.append(call_id)
        return ToolOutcome.done(None)

    access = ToolAccess(lookup=items.registry.find, permitted=sync_to_async(lambda tool: True), execute=execute)
    steps = [step async for step in carry_out(access, "call_1", "items__get_item", args)]

    [outcome] = steps
    assert outcome.outcome == Outcome.INVALID and problem in outcome.error, outcome.error
    assert executed == []


async def test_the_gate_stops_a_destructive_call_with_its_normalised_arguments(items):
    access = ToolAccess(lookup=items.registry.find, permitted=sync_to_async(lambda tool: True), execute=None)
    [step] = [step async for step in carry_out(access, "call_1", "items__delete_item", {"id": 2})]
    assert isinstance(step, NeedsConfirmation) and step.args == {"id": 2}


async def test_a_call_that_takes_too_long_is_cut_at_the_server_s_timeout(items):
    started = time.monotonic()
    with pytest.raises(McpCallError, match=r"^MCP server 'items' did not answer within 1 s\.$"):
        await run(items, "items__sleep", {"seconds": 30})
    assert time.monotonic() - started < 3
    assert await run(items, "items__find_items", {"text": "dune"}) == "Dune"  # the session goes on


async def test_the_tool_s_own_deadline_applies_too(items):
    tool = replace(items.registry.get("items__sleep"), timeout=0.2)
    with pytest.raises(ToolTimeout, match=r"^items__sleep did not finish within 0\.2 s\.$"):
        await tool.run(tool.validate({"seconds": 30}), ToolContext(user=None))


async def test_a_crash_is_a_clear_error_and_the_next_call_starts_the_server_again_with_a_notice(start_items):
    toolset = await sync_to_async(start_items)()
    with pytest.raises(McpCallError) as caught:
        await run(toolset, "items__crash", {})
    assert str(caught.value) == (
        "MCP server 'items' stopped during the call, so whether it took effect is not known. "
        "It is started again at the next call."
    )

    assert await run(toolset, "items__find_items", {"text": "dune"}) == {
        "result": "Dune",
        "notice": "MCP server 'items' had stopped; it was started again for this call.",
    }
    assert await run(toolset, "items__find_items", {"text": "dune"}) == "Dune"

    # One that stops between calls is noticed at once, and started again at the next call the same way.
    assert await run(toolset, "items__quit", {}) == "bye"
    async with asyncio.timeout(5):
        while toolset.connection.connected:
            await asyncio.sleep(0.02)
    assert await run(toolset, "items__find_items", {"text": "dune"}) == {
        "result": "Dune",
        "notice": "MCP server 'items' had stopped; it was started again for this call.",
    }
    assert toolset.connection.starts == 3


@pytest.mark.parametrize("legacy", [False, True], ids=["2026 subscription", "handshake-era notification"])
async def test_the_tools_are_listed_again_when_the_server_says_they_changed(start_items, legacy):
    toolset = await sync_to_async(start_items)(legacy=legacy)
    assert not toolset.registry.has("items__shelve")

    assert await run(toolset, "items__add_tool", {"name": "shelve"}) == "Added shelve."

    async with asyncio.timeout(5):
        while not toolset.registry.has("items__shelve"):
            await asyncio.sleep(0.02)
    assert await run(toolset, "items__shelve", {}) == "shelve"
    assert toolset.registry.get("items__shelve").description == "(from MCP server 'items') shelve"


async def test_a_stdio_server_gets_no_identity_unless_its_entry_asks(items, start_items, alice):
    assert await run(items, "items__whoami", {}, user=alice) == {"header": None, "meta": None}

    toolset = await sync_to_async(start_items)(identity=True, identity_secret_env="TEST_MCP_IDENTITY_SECRET")
    seen = await run(toolset, "items__whoami", {}, user=alice)
    assert seen["header"] is None and seen["meta"].startswith("ey")

    with pytest.raises(McpCallError, match="only called on behalf of a signed-in user"):
        await run(toolset, "items__whoami", {})
