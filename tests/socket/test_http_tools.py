"""HTTP service tools in live runs: a refusal reaches the model as a tool error; non-GET calls wait for approval."""

from __future__ import annotations

import json

import pytest
from asgiref.sync import sync_to_async

from conversations import runs, services
from conversations.models import Message
from tests.fake_provider import Reply
from tests.http_service import SECRET, SECRET_ENV, TOKEN_ENV, BillingService, agent_token, billing_entry
from tools.http.config import parse_services
from tools.http.toolset import register_services
from tools.registry import ToolRegistry

from .helpers import of

pytestmark = pytest.mark.django_db(transaction=True)

REFUND = {"invoice_id": 7, "amount": 10.5, "reason": "late delivery"}


@pytest.fixture
def billing(tmp_path, monkeypatch):
    """The service running, and its tools as the only tools of the runs (never on the global registry)."""
    monkeypatch.setenv(SECRET_ENV, SECRET)
    monkeypatch.setenv(TOKEN_ENV, agent_token())
    with BillingService(secret=SECRET) as service:
        openapi = service.write_openapi(tmp_path / "billing.json")
        registry = ToolRegistry()
        register_services(
            registry,
            parse_services([billing_entry(service, str(openapi))], variable="HTTP_SERVICES", base_dir=tmp_path),
        )
        monkeypatch.setattr(runs.manager, "registry", registry)
        yield service


@sync_to_async
def tool_message(conversation, call_id: str) -> Message:
    return Message.objects.get(conversation=conversation, role=Message.Role.TOOL, tool_call_id=call_id)


def wire_tool_message(llm, call_id: str) -> dict:
    return next(m for m in llm.requests[-1].messages if m["role"] == "tool" and m.get("tool_call_id") == call_id)


async def test_bob_s_403_reaches_the_model_as_a_clear_tool_error(llm, billing, sockets, bob):
    conversation = await sync_to_async(services.conversation_create)(owner=bob)
    socket = await sockets(conversation, bob)
    llm.script(
        Reply(tool_calls=[("billing_getInvoice", {"invoice_id": 7}, "call_invoice")]),
        Reply(text="You are not allowed to see invoice 7."),
    )
    await socket.send({"type": "message", "content": "Show invoice 7"})
    frames = await socket.receive_until("run_finished")

    assert frames[-1]["status"] == "completed", frames
    [error] = of(frames, "tool_error", tool_call_id="call_invoice")
    expected = "billing refused: this user may not do that (403 Forbidden): bob may not see invoices."
    assert error["tool"] == "billing_getInvoice" and expected in error["error"]
    assert not of(frames, "tool_end")
    # The service saw bob, and the model's next request carries the refusal.
    [arrived] = billing.calls()
    assert arrived.claims["username"] == "bob"
    assert expected in wire_tool_message(llm, "call_invoice")["content"]
    stored = await tool_message(conversation, "call_invoice")
    assert stored.is_error and expected in stored.content


async def test_alice_s_get_runs_without_asking(llm, billing, sockets, conversation, alice):
    socket = await sockets(conversation, alice)
    llm.script(
        Reply(tool_calls=[("billing_getInvoice", {"invoice_id": 7}, "call_invoice")]),
        Reply(text="Invoice 7 is open."),
    )
    await socket.send({"type": "message", "content": "Show invoice 7"})
    frames = await socket.receive_until("run_finished")

    assert frames[-1]["status"] == "completed" and not of(frames, "confirm_required")
    [end] = of(frames, "tool_end", tool_call_id="call_invoice")
    assert end["output"] == {"id": 7, "status": "open", "owner": "alice", "amount": 120.5}
    assert json.loads(wire_tool_message(llm, "call_invoice")["content"]) == end["output"]
    assert [arrived.claims["username"] for arrived in billing.calls()] == ["alice"]


async def ask_for_refund(llm, socket) -> dict:
    llm.script(Reply(text="I will refund it.", tool_calls=[("billing_createRefund", REFUND, "call_refund")]))
    await socket.send({"type": "message", "content": "Refund 10.50 of invoice 7"})
    frames = await socket.receive_until("run_finished")
    assert frames[-1]["status"] == "awaiting_confirmation", frames
    [confirm] = of(frames, "confirm_required")
    assert confirm["tool"] == "billing_createRefund" and confirm["input"] == REFUND
    return confirm


async def test_a_post_waits_for_approval_and_calls_the_service_once_after_it(
    llm, billing, sockets, conversation, alice
):
    socket = await sockets(conversation, alice)
    confirm = await ask_for_refund(llm, socket)
    assert billing.calls() == []  # the run has ended awaiting the decision: nothing reached the service

    llm.script(Reply(text="Refunded."))
    await socket.send({"type": "confirm", "confirmation_id": confirm["confirmation_id"], "decision": "approve"})
    frames = await socket.receive_until("run_finished")

    assert frames[-1]["status"] == "completed", frames
    [end] = of(frames, "tool_end", tool_call_id="call_refund")
    assert end["output"] == {"refunded": {"amount": 10.5, "reason": "late delivery"}, "invoice": 7}
    [arrived] = billing.calls()
    assert (arrived.method, arrived.path) == ("POST", "/api/invoices/7/refunds")
    assert arrived.claims["username"] == "alice"


async def test_a_rejected_post_never_reaches_the_service(llm, billing, sockets, conversation, alice):
    socket = await sockets(conversation, alice)
    confirm = await ask_for_refund(llm, socket)

    llm.script(Reply(text="Fine, no refund."))
    await socket.send(
        {"type": "confirm", "confirmation_id": confirm["confirmation_id"], "decision": "reject", "reason": "no"}
    )
    frames = await socket.receive_until("run_finished")

    assert frames[-1]["status"] == "completed", frames
    [error] = of(frames, "tool_error", tool_call_id="call_refund")
    assert "rejected by the user" in error["error"]
    assert billing.calls() == []  # the run is over: nothing can reach the service any more


async def test_edited_arguments_are_validated_and_sent_instead(llm, billing, sockets, conversation, alice):
    socket = await sockets(conversation, alice)
    confirm = await ask_for_refund(llm, socket)

    await socket.send(
        {"type": "confirm", "confirmation_id": confirm["confirmation_id"], "decision": "edit", "args": {"amount": 5}}
    )
    error = await socket.receive()
    assert (
        error["type"] == "error"
        and error["code"] == "INVALID"
        and "invoice_id: required, but missing" in error["message"]
    )
    assert billing.calls() == []

    llm.script(Reply(text="Refunded 5."))
    edited = {"invoice_id": 7, "amount": 5}
    await socket.send(
        {"type": "confirm", "confirmation_id": confirm["confirmation_id"], "decision": "edit", "args": edited}
    )
    frames = await socket.receive_until("run_finished")

    assert frames[-1]["status"] == "completed", frames
    [arrived] = billing.calls()
    assert arrived.body == {"amount": 5.0}  # the reason the model gave was edited away, and null is not sent
