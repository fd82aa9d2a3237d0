"""MCP tools in live runs over the real socket: the fake provider calls them, the destructive one waits for approval."""

from __future__ import annotations

import pytest
from asgiref.sync import sync_to_async

from conversations import runs, services
from tests.fake_provider import Reply
from tests.socket.helpers import of, one, tool_messages
from tests.tools.dashboards.conftest import grant

from .conftest import PERMISSION

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def items_in_runs(items, monkeypatch):
    """The test server's tools as the only tools of the runs (never on the global registry)."""
    monkeypatch.setattr(runs.manager, "registry", items.registry)
    return items


def wire_tool_message(llm, call_id: str) -> dict:
    return next(m for m in llm.requests[-1].messages if m["role"] == "tool" and m.get("tool_call_id") == call_id)


async def test_alice_s_run_calls_an_mcp_tool_and_waits_for_approval_of_the_destructive_one(
    llm, items_in_runs, sockets, conversation, alice
):
    await sync_to_async(grant)(alice, PERMISSION)
    socket = await sockets(conversation, alice)
    llm.script(
        Reply(tool_calls=[("items__find_items", {"text": "dune"}, "call_find")]),
        Reply(text="Dune is in the store."),
    )
    await socket.send({"type": "message", "content": "Is Dune in the store?"})
    frames = await socket.receive_until("run_finished")

    assert frames[-1]["status"] == "completed", frames
    assert "items__find_items" in [tool["function"]["name"] for tool in llm.requests[0].tools]
    assert not of(frames, "confirm_required")
    assert one(frames, "tool_end", tool_call_id="call_find")["output"] == "Dune"
    assert wire_tool_message(llm, "call_find")["content"] == "Dune"

    llm.script(Reply(text="I will delete it.", tool_calls=[("items__delete_item", {"id": 2}, "call_delete")]))
    await socket.send({"type": "message", "content": "Delete item 2"})
    frames = await socket.receive_until("run_finished")
    assert frames[-1]["status"] == "awaiting_confirmation", frames
    confirm = one(frames, "confirm_required")
    assert confirm["tool"] == "items__delete_item" and confirm["input"] == {"id": 2}
    assert not of(frames, "tool_end")

    llm.script(Reply(text="Deleted."))
    await socket.send({"type": "confirm", "confirmation_id": confirm["confirmation_id"], "decision": "approve"})
    frames = await socket.receive_until("run_finished")

    assert frames[-1]["status"] == "completed", frames
    assert one(frames, "tool_end", tool_call_id="call_delete")["output"] == "Deleted item 2."
    [stored] = await tool_messages(conversation, "call_delete")
    assert not stored.is_error and stored.content == "Deleted item 2."


async def test_bob_is_not_offered_the_tools_and_a_call_is_refused(llm, items_in_runs, sockets, bob):
    conversation = await sync_to_async(services.conversation_create)(owner=bob)
    socket = await sockets(conversation, bob)
    llm.script(Reply(tool_calls=[("items__find_items", {"text": "dune"}, "call_find")]), Reply(text="I may not."))
    await socket.send({"type": "message", "content": "Is Dune in the store?"})
    frames = await socket.receive_until("run_finished")

    assert frames[-1]["status"] == "completed", frames
    assert llm.requests[0].tools == []
    error = one(frames, "tool_error", tool_call_id="call_find")
    assert "permission denied: you may not use items__find_items." in error["error"]


async def test_a_server_error_reaches_the_model_as_a_tool_error(llm, items_in_runs, sockets, conversation, alice):
    await sync_to_async(grant)(alice, PERMISSION)
    socket = await sockets(conversation, alice)
    llm.script(Reply(tool_calls=[("items__fail", {}, "call_fail")]), Reply(text="The store is locked."))
    await socket.send({"type": "message", "content": "Try it"})
    frames = await socket.receive_until("run_finished")

    assert frames[-1]["status"] == "completed", frames
    expected = "items__fail failed: MCP server 'items' answered with an error: the item store is locked"
    assert expected in one(frames, "tool_error", tool_call_id="call_fail")["error"]
    assert wire_tool_message(llm, "call_fail")["content"] == f"Error: {expected}"
