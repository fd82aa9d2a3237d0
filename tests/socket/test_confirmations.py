"""Confirmations over the real socket: a dangerous tool waits for its owner's one decision, from any tab, after a
restart."""

from __future__ import annotations

import asyncio
import json
import threading
import time
import uuid
from datetime import datetime
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from django.conf import settings
from django.contrib.auth.models import Permission
from django.utils import timezone

from agentchat.agent.providers import get_provider
from conversations import runs, services
from conversations.models import AuditEvent, Message, PendingConfirmation, ToolJob
from tests.fake_provider import Reply
from tools.registry import ToolArgs, ToolRegistry

from .helpers import of, one, tool_messages

pytestmark = pytest.mark.django_db(transaction=True)

DEPLOY_CALL = "call_deploy"
LOOKUP_CALL = "call_lookup"
ASKED = {"dashboard_id": 7, "environment": "staging"}
DROP_PERMISSION = "auth.delete_group"


class DeployArgs(ToolArgs):
    dashboard_id: int
    environment: str = "production"


class LookupArgs(ToolArgs):
    dashboard_id: int


class Calls:
    """What the test tools were really called with."""

    def __init__(self) -> None:
        self.deploy: list[dict[str, Any]] = []
        self.lookup: list[int] = []
        self.contexts: dict[str, Any] = {}
        self.drop: list[int] = []
        # Set, deploy_dashboard has started and waits for `release` (tests that act while it runs).
        self.started = threading.Event()
        self.release: threading.Event | None = None


@pytest.fixture
def tools(monkeypatch) -> Calls:
    registry = ToolRegistry()
    calls = Calls()

    @registry.tool(requires_confirmation=True)
    def deploy_dashboard(args: DeployArgs, ctx) -> dict:
        """Deploy a dashboard to an environment."""
        calls.started.set()
        if calls.release is not None:
            calls.release.wait(timeout=10)
        calls.deploy.append(args.model_dump())
        calls.contexts["deploy_dashboard"] = ctx
        return {"deployed": args.dashboard_id, "environment": args.environment}

    @registry.tool
    def lookup_dashboard(args: LookupArgs, ctx) -> dict:
        """Look a dashboard up by its id."""
        calls.lookup.append(args.dashboard_id)
        calls.contexts["lookup_dashboard"] = ctx
        return {"id": args.dashboard_id, "name": "Sales"}

    @registry.tool(requires_confirmation=True, permission=DROP_PERMISSION)
    def drop_dashboard(args: LookupArgs, ctx) -> dict:
        """Delete a dashboard for good."""
        calls.drop.append(args.dashboard_id)
        return {"dropped": args.dashboard_id}

    monkeypatch.setattr(runs.manager, "registry", registry)
    return calls


# --- helpers -------------------------------------------------------------------------------------


def assert_ordered(frames: list[dict[str, Any]], run_id: str) -> None:
    seqs = [f["seq"] for f in frames if f.get("run_id") == run_id and "seq" in f]
    assert seqs == sorted(set(seqs)), seqs


async def ask_for_deploy(llm, socket, *, context: dict | None = None):
    """The model looks the dashboard up (safe) and asks to deploy it (dangerous) in one round."""
    llm.script(
        Reply(
            text="Let me deploy it.",
            tool_calls=[
                ("lookup_dashboard", {"dashboard_id": 7}, LOOKUP_CALL),
                ("deploy_dashboard", ASKED, DEPLOY_CALL),
            ],
        )
    )
    await socket.send({"type": "message", "content": "Deploy dashboard 7", "context": context or {}})
    frames = await socket.receive_until("run_finished")
    assert frames[-1]["status"] == "awaiting_confirmation", frames
    return one(frames, "confirm_required"), frames


async def decide(socket, confirmation_id: str, decision: str = "approve", **extra) -> None:
    await socket.send({"type": "confirm", "confirmation_id": confirmation_id, "decision": decision, **extra})


async def expect_error(socket, code: str) -> dict[str, Any]:
    frame = await socket.receive()
    assert frame["type"] == "error" and frame["code"] == code, frame
    return frame


@sync_to_async
def confirmation_row(pk) -> PendingConfirmation:
    return PendingConfirmation.objects.get(pk=pk)


@sync_to_async
def audits(conversation, kind: str) -> list[AuditEvent]:
    return list(AuditEvent.objects.filter(conversation=conversation, kind=kind).order_by("created_at", "id"))


@sync_to_async
def message_row(pk) -> Message:
    return Message.objects.get(pk=pk)


def after_the_call(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The wire messages from the assistant's tool-call message on."""
    index = next(i for i, m in enumerate(messages) if m["role"] == "assistant" and m.get("tool_calls"))
    return messages[index:]


async def expect_resumed(llm, tools: Calls, conversation, frames, *, ran_with: dict, answer: str) -> dict[str, Any]:
    """The decided call ran once with `ran_with`, its result went to the model, and the answer streamed."""
    finished = frames[-1]
    assert finished["type"] == "run_finished" and finished["status"] == "completed", frames
    assert not of(frames, "error"), frames
    assert_ordered(frames, finished["run_id"])
    start = one(frames, "tool_start", tool_call_id=DEPLOY_CALL)
    end = one(frames, "tool_end", tool_call_id=DEPLOY_CALL)
    assert start["tool"] == end["tool"] == "deploy_dashboard"
    assert start["input"] == ran_with
    assert start["run_id"] == end["run_id"] == finished["run_id"]
    assert end["output"] == {"deployed": ran_with["dashboard_id"], "environment": ran_with["environment"]}
    assert tools.deploy == [ran_with]
    assert "".join(f["delta"] for f in of(frames, "token")) == answer

    [result] = await tool_messages(conversation, DEPLOY_CALL)
    assert not result.is_error and result.tool_name == "deploy_dashboard"
    assert json.loads(result.content) == end["output"]
    assert [f["message"]["id"] for f in of(frames, "message") if f["message"]["role"] == "tool"] == [result.pk]

    wire = after_the_call(llm.requests[-1].messages)
    assert [call["id"] for call in wire[0]["tool_calls"]] == [LOOKUP_CALL, DEPLOY_CALL]
    assert [(m["role"], m.get("tool_call_id")) for m in wire[1:]] == [("tool", LOOKUP_CALL), ("tool", DEPLOY_CALL)]
    assert json.loads(wire[2]["content"]) == end["output"]

    final = await message_row(finished["message_id"])
    assert (final.role, final.status, final.content) == (Message.Role.ASSISTANT, Message.Status.COMPLETE, answer)
    return end


# --- the request -----------------------------------------------------------------------------------


async def test_a_dangerous_call_waits_while_the_safe_ones_of_its_round_run(llm, tools, sockets, conversation, alice):
    socket = await sockets(conversation, alice)
    confirm, frames = await ask_for_deploy(llm, socket)
    finished = frames[-1]

    assert confirm["tool_call_id"] == DEPLOY_CALL and confirm["tool"] == "deploy_dashboard"
    assert confirm["input"] == ASKED
    assert confirm["run_id"] == finished["run_id"] and 0 < confirm["seq"] < finished["seq"]
    assert_ordered(frames, finished["run_id"])
    expires = datetime.fromisoformat(confirm["expires_at"])
    assert abs((expires - timezone.now()) - settings.CONFIRMATION_TTL).total_seconds() < 30

    # The safe call of the same round ran; the dangerous one did not.
    assert tools.lookup == [7] and tools.deploy == []
    assert one(frames, "tool_end", tool_call_id=LOOKUP_CALL)["output"] == {"id": 7, "name": "Sales"}
    assert [f["tool_call_id"] for f in of(frames, "tool_start") + of(frames, "tool_end")] == [LOOKUP_CALL] * 2
    assert [m.tool_call_id for m in await tool_messages(conversation)] == [LOOKUP_CALL]

    row = await confirmation_row(confirm["confirmation_id"])
    assert row.status == PendingConfirmation.Status.PENDING
    assert (row.tool_call_id, row.tool_name, row.args) == (DEPLOY_CALL, "deploy_dashboard", ASKED)
    assert row.args_hash == services.args_hash(ASKED)
    assert row.decided_by_id is None and row.decided_at is None and row.edited_args is None
    assert row.expires_at == expires
    assert row.message_id == finished["message_id"]
    assistant = await message_row(row.message_id)
    assert [call["id"] for call in assistant.tool_calls] == [LOOKUP_CALL, DEPLOY_CALL]

    [requested] = await audits(conversation, AuditEvent.Kind.CONFIRMATION_REQUESTED)
    assert requested.actor_id == alice.pk
    assert requested.data == {"confirmation_id": str(row.pk), "tool": "deploy_dashboard", "args": ASKED}
    assert await audits(conversation, AuditEvent.Kind.CONFIRMATION_DECIDED) == []
    assert await socket.quiet()


# --- the decisions ---------------------------------------------------------------------------------


async def test_approve_runs_the_stored_call_once_and_resumes_the_run(llm, tools, sockets, conversation, alice):
    socket = await sockets(conversation, alice)
    confirm, _ = await ask_for_deploy(llm, socket)
    llm.script(Reply(text="Dashboard 7 is live on staging."))

    await decide(socket, confirm["confirmation_id"])
    frames = await socket.receive_until("run_finished")

    await expect_resumed(llm, tools, conversation, frames, ran_with=ASKED, answer="Dashboard 7 is live on staging.")
    assert len(llm.requests) == 2
    row = await confirmation_row(confirm["confirmation_id"])
    assert row.status == PendingConfirmation.Status.APPROVED
    assert row.decided_by_id == alice.pk and row.decided_at is not None and row.edited_args is None
    [decided] = await audits(conversation, AuditEvent.Kind.CONFIRMATION_DECIDED)
    assert decided.actor_id == alice.pk
    assert decided.data["decision"] == "approve" and decided.data["confirmation_id"] == str(row.pk)
    assert decided.data["args"] == ASKED and decided.data["edited_args"] is None
    called = [event.data for event in await audits(conversation, AuditEvent.Kind.TOOL_CALLED)]
    assert {"tool": "deploy_dashboard", "tool_call_id": "call_deploy", "args": ASKED} in called
    assert await socket.quiet()


async def test_edit_runs_the_call_with_the_edited_arguments(llm, tools, sockets, conversation, alice):
    socket = await sockets(conversation, alice)
    confirm, _ = await ask_for_deploy(llm, socket)
    llm.script(Reply(text="Dashboard 9 is live on qa."))
    edited = {"dashboard_id": 9, "environment": "qa"}

    await decide(socket, confirm["confirmation_id"], "edit", args=edited)
    frames = await socket.receive_until("run_finished")

    await expect_resumed(llm, tools, conversation, frames, ran_with=edited, answer="Dashboard 9 is live on qa.")
    row = await confirmation_row(confirm["confirmation_id"])
    assert row.status == PendingConfirmation.Status.EDITED
    assert row.edited_args == edited and row.args == ASKED and row.decided_by_id == alice.pk
    [decided] = await audits(conversation, AuditEvent.Kind.CONFIRMATION_DECIDED)
    assert decided.data["decision"] == "edit"
    assert decided.data["args"] == ASKED and decided.data["edited_args"] == edited


@pytest.mark.parametrize(
    "args", [{"dashboard_id": "abc", "environment": "qa"}, {"environment": "qa"}], ids=["mistyped", "missing"]
)
async def test_an_edit_with_invalid_arguments_is_refused_and_decides_nothing(
    llm, tools, sockets, conversation, alice, args
):
    socket = await sockets(conversation, alice)
    confirm, _ = await ask_for_deploy(llm, socket)

    await decide(socket, confirm["confirmation_id"], "edit", args=args)
    error = await expect_error(socket, "INVALID")
    assert "dashboard_id" in error["message"]
    assert await socket.quiet()

    assert tools.deploy == []
    row = await confirmation_row(confirm["confirmation_id"])
    assert row.status == PendingConfirmation.Status.PENDING
    assert row.decided_by_id is None and row.edited_args is None
    assert await audits(conversation, AuditEvent.Kind.CONFIRMATION_DECIDED) == []
    assert await tool_messages(conversation, DEPLOY_CALL) == []

    # Still decidable: the refused edit left neither the decision nor the run gate taken.
    llm.script(Reply(text="Deployed."))
    await decide(socket, confirm["confirmation_id"])
    frames = await socket.receive_until("run_finished")
    await expect_resumed(llm, tools, conversation, frames, ran_with=ASKED, answer="Deployed.")


async def test_reject_records_the_reason_and_resumes_without_running(llm, tools, sockets, conversation, alice):
    socket = await sockets(conversation, alice)
    confirm, _ = await ask_for_deploy(llm, socket)
    llm.script(Reply(text="Understood, I will not deploy it."))

    await decide(socket, confirm["confirmation_id"], "reject", reason="Not on a Friday")
    frames = await socket.receive_until("run_finished")

    assert frames[-1]["status"] == "completed" and not of(frames, "error"), frames
    assert tools.deploy == []
    assert not of(frames, "tool_start", tool_call_id=DEPLOY_CALL) and not of(frames, "tool_end")
    failed = one(frames, "tool_error", tool_call_id=DEPLOY_CALL)
    assert "rejected" in failed["error"] and "Not on a Friday" in failed["error"]
    assert "".join(f["delta"] for f in of(frames, "token")) == "Understood, I will not deploy it."

    [result] = await tool_messages(conversation, DEPLOY_CALL)
    assert result.is_error and "rejected" in result.content and "Not on a Friday" in result.content
    wire = after_the_call(llm.requests[1].messages)
    assert [(m["role"], m.get("tool_call_id")) for m in wire[1:]] == [("tool", LOOKUP_CALL), ("tool", DEPLOY_CALL)]
    assert wire[2]["content"] == result.content

    row = await confirmation_row(confirm["confirmation_id"])
    assert row.status == PendingConfirmation.Status.REJECTED
    assert row.reason == "Not on a Friday" and row.decided_by_id == alice.pk and row.edited_args is None
    [decided] = await audits(conversation, AuditEvent.Kind.CONFIRMATION_DECIDED)
    assert decided.data["decision"] == "reject" and decided.data["reason"] == "Not on a Friday"
    assert decided.data["args"] == ASKED


async def test_the_request_carries_the_tools_schema_and_the_result_the_decision(
    llm, tools, sockets, conversation, alice
):
    """The page builds the arguments' form from the schema, and turns the approval into its record from the result."""
    socket = await sockets(conversation, alice)
    confirm, asked = await ask_for_deploy(llm, socket)
    assert confirm["schema"] == runs.manager.registry.get("deploy_dashboard").schema()["parameters"]
    assert confirm["schema"]["required"] == ["dashboard_id"] and "environment" in confirm["schema"]["properties"]
    reopened = await sockets(conversation, alice)
    [listed] = reopened.ready["pending_confirmations"]
    assert listed["schema"] == confirm["schema"]
    [lookup] = [f["message"] for f in of(asked, "message") if f["message"]["tool_call_id"] == LOOKUP_CALL]
    assert lookup["decision"] is None  # a call that asked nobody
    llm.script(Reply(text="Dashboard 9 is live on qa."))

    await decide(socket, confirm["confirmation_id"], "edit", args={"dashboard_id": 9, "environment": "qa"})
    frames = await socket.receive_until("run_finished")

    [result] = [f["message"] for f in of(frames, "message") if f["message"]["tool_call_id"] == DEPLOY_CALL]
    decision = result["decision"]
    assert (decision["status"], decision["decided_by"], decision["reason"]) == ("edited", "alice", "")
    assert decision["args"] == {"dashboard_id": 9, "environment": "qa"} and decision["decided_at"]


async def test_a_call_running_after_its_approval_shows_the_decision_in_every_tab(
    llm, tools, sockets, conversation, alice
):
    socket = await sockets(conversation, alice)
    other = await sockets(conversation, alice)
    confirm, asked = await ask_for_deploy(llm, socket)
    assert one(asked, "tool_start", tool_call_id=LOOKUP_CALL)["decision"] is None  # it asked nobody
    await other.receive_until("run_finished")
    tools.release = threading.Event()
    llm.script(Reply(text="Deployed."))

    await decide(socket, confirm["confirmation_id"], "edit", args={"dashboard_id": 9, "environment": "qa"})
    [started] = of(await other.receive_until("tool_start", tool_call_id=DEPLOY_CALL), "tool_start")
    assert await asyncio.to_thread(tools.started.wait, 5)
    reopened = await sockets(conversation, alice)
    tools.release.set()

    [running] = reopened.ready["run"]["tools"]
    for decision in (started["decision"], running["decision"]):
        assert (decision["status"], decision["decided_by"]) == ("edited", "alice")
        assert decision["args"] == {"dashboard_id": 9, "environment": "qa"} and decision["decided_at"]
    assert running["input"] == started["input"] == {"dashboard_id": 9, "environment": "qa"}
    assert (await socket.receive_until("run_finished"))[-1]["status"] == "completed"


# --- a decision is taken once ----------------------------------------------------------------------


async def test_a_second_decision_is_expired_and_runs_nothing_again(llm, tools, sockets, conversation, alice):
    socket = await sockets(conversation, alice)
    confirm, _ = await ask_for_deploy(llm, socket)
    llm.script(Reply(text="Deployed."))
    await decide(socket, confirm["confirmation_id"])
    await socket.receive_until("run_finished", status="completed")

    for decision, extra in [("approve", {}), ("reject", {"reason": "changed my mind"}), ("edit", {"args": ASKED})]:
        await decide(socket, confirm["confirmation_id"], decision, **extra)
        await expect_error(socket, "CHECKPOINT_EXPIRED")
    assert await socket.quiet()

    assert tools.deploy == [ASKED]
    assert len(llm.requests) == 2
    row = await confirmation_row(confirm["confirmation_id"])
    assert row.status == PendingConfirmation.Status.APPROVED and row.reason == ""
    assert len(await audits(conversation, AuditEvent.Kind.CONFIRMATION_DECIDED)) == 1
    assert len(await tool_messages(conversation, DEPLOY_CALL)) == 1


async def test_two_tabs_approving_at_once_run_the_tool_once(llm, tools, sockets, conversation, alice):
    first, second = await sockets(conversation, alice), await sockets(conversation, alice)
    confirm, _ = await ask_for_deploy(llm, first)
    await second.receive_until("run_finished", status="awaiting_confirmation")
    llm.script(Reply(text="Deployed once."))

    approve = {"type": "confirm", "confirmation_id": confirm["confirmation_id"], "decision": "approve"}
    await asyncio.gather(first.send(approve), second.send(approve))
    seen = {first: await first.receive_until("run_finished"), second: await second.receive_until("run_finished")}
    # The tab that lost may only hear so after waiting for the gate: give it that long.
    deadline = time.monotonic() + 2
    while not any(of(frames, "error") for frames in seen.values()) and time.monotonic() < deadline:
        for socket, frames in seen.items():
            if not await socket.nothing(0.05):
                frames.append(await socket.receive())

    errors = [f for frames in seen.values() for f in of(frames, "error")]
    assert [f["code"] for f in errors] == ["CHECKPOINT_EXPIRED"], errors
    for frames in seen.values():
        finished = of(frames, "run_finished")
        assert [f["status"] for f in finished] == ["completed"], frames
        assert len(of(frames, "tool_start", tool_call_id=DEPLOY_CALL)) == 1
    assert of(seen[first], "run_finished")[0]["run_id"] == of(seen[second], "run_finished")[0]["run_id"]
    assert await first.quiet() and await second.quiet()

    assert tools.deploy == [ASKED]
    assert len(llm.requests) == 2
    assert len(await tool_messages(conversation, DEPLOY_CALL)) == 1
    [decided] = await audits(conversation, AuditEvent.Kind.CONFIRMATION_DECIDED)
    assert decided.data["decision"] == "approve"
    assert (await confirmation_row(confirm["confirmation_id"])).status == PendingConfirmation.Status.APPROVED


async def test_someone_elses_or_an_unknown_confirmation_is_not_found(llm, tools, sockets, conversation, alice, bob):
    socket = await sockets(conversation, alice)
    confirm, _ = await ask_for_deploy(llm, socket)

    # Bob cannot even join Alice's conversation...
    intruder = await sockets(conversation, bob, ready=False)
    assert (await intruder.receive())["code"] == "NOT_FOUND"
    # ...and from his own conversation, Alice's confirmation does not exist for him.
    his = await sync_to_async(services.conversation_create)(owner=bob)
    bobs = await sockets(his, bob)
    for decision, extra in [("approve", {}), ("reject", {"reason": "no"}), ("edit", {"args": ASKED})]:
        await decide(bobs, confirm["confirmation_id"], decision, **extra)
        await expect_error(bobs, "NOT_FOUND")
    # An id that names nothing, even in Alice's own conversation.
    await decide(socket, str(uuid.uuid4()))
    await expect_error(socket, "NOT_FOUND")
    assert await socket.quiet() and await bobs.quiet()

    assert tools.deploy == []
    row = await confirmation_row(confirm["confirmation_id"])
    assert row.status == PendingConfirmation.Status.PENDING and row.decided_by_id is None
    assert await audits(conversation, AuditEvent.Kind.CONFIRMATION_DECIDED) == []


# --- confirmations that lapse ----------------------------------------------------------------------


async def test_a_new_message_supersedes_the_pending_confirmation(llm, tools, sockets, conversation, alice):
    socket = await sockets(conversation, alice)
    confirm, _ = await ask_for_deploy(llm, socket)
    llm.script(Reply(text="Here are the stats instead."))

    await socket.send({"type": "message", "content": "Never mind, show me the stats", "client_id": "c2"})
    frames = await socket.receive_until("run_finished")

    # Every tab first learns that the decision lapsed, then sees the new message.
    assert frames[0]["type"] == "message" and frames[0]["message"]["role"] == "tool"
    assert frames[0]["message"]["tool_call_id"] == DEPLOY_CALL and "not run" in frames[0]["message"]["content"]
    assert frames[1]["type"] == "message" and frames[1]["client_id"] == "c2"
    one(frames, "run_started")
    assert frames[-1]["status"] == "completed" and not of(frames, "error"), frames
    assert "".join(f["delta"] for f in of(frames, "token")) == "Here are the stats instead."
    assert tools.deploy == []

    row = await confirmation_row(confirm["confirmation_id"])
    assert row.status == PendingConfirmation.Status.SUPERSEDED
    [result] = await tool_messages(conversation, DEPLOY_CALL)
    assert result.is_error and "not run" in result.content and "new message" in result.content
    wire = after_the_call(llm.requests[1].messages)
    assert [(m["role"], m.get("tool_call_id")) for m in wire[1:]] == [
        ("tool", LOOKUP_CALL),
        ("tool", DEPLOY_CALL),
        ("user", None),
    ]
    assert wire[2]["content"] == result.content and wire[3]["content"] == "Never mind, show me the stats"
    [decided] = await audits(conversation, AuditEvent.Kind.CONFIRMATION_DECIDED)
    assert decided.data["decision"] == PendingConfirmation.Status.SUPERSEDED
    assert decided.data["confirmation_id"] == str(row.pk)

    await decide(socket, confirm["confirmation_id"])
    await expect_error(socket, "CHECKPOINT_EXPIRED")
    assert await socket.quiet()
    assert tools.deploy == []
    assert (await confirmation_row(confirm["confirmation_id"])).status == PendingConfirmation.Status.SUPERSEDED


async def test_archiving_the_conversation_expires_its_confirmations(llm, tools, sockets, conversation, alice):
    socket = await sockets(conversation, alice)
    confirm, _ = await ask_for_deploy(llm, socket)

    await sync_to_async(services.conversation_archive)(conversation=conversation, actor=alice)
    row = await confirmation_row(confirm["confirmation_id"])
    assert row.status == PendingConfirmation.Status.EXPIRED

    await decide(socket, confirm["confirmation_id"])
    await expect_error(socket, "CHECKPOINT_EXPIRED")
    assert await socket.quiet()
    assert tools.deploy == []
    row = await confirmation_row(confirm["confirmation_id"])
    assert row.status == PendingConfirmation.Status.EXPIRED and row.decided_by_id is None
    assert await audits(conversation, AuditEvent.Kind.CONFIRMATION_DECIDED) == []
    assert await tool_messages(conversation, DEPLOY_CALL) == []


async def test_an_expired_confirmation_cannot_be_decided(llm, tools, sockets, conversation, alice):
    socket = await sockets(conversation, alice)
    confirm, _ = await ask_for_deploy(llm, socket)
    await sync_to_async(PendingConfirmation.objects.filter(pk=confirm["confirmation_id"]).update)(
        expires_at=timezone.now() - settings.CONFIRMATION_TTL / 1000
    )

    await decide(socket, confirm["confirmation_id"])
    await expect_error(socket, "CHECKPOINT_EXPIRED")
    await decide(socket, confirm["confirmation_id"], "edit", args={"dashboard_id": 8})
    await expect_error(socket, "CHECKPOINT_EXPIRED")
    assert await socket.quiet()

    assert tools.deploy == []
    row = await confirmation_row(confirm["confirmation_id"])
    assert row.status not in {PendingConfirmation.Status.APPROVED, PendingConfirmation.Status.EDITED}
    assert row.decided_by_id is None and row.edited_args is None
    assert await audits(conversation, AuditEvent.Kind.CONFIRMATION_DECIDED) == []
    assert await tool_messages(conversation, DEPLOY_CALL) == []
    # A tab opened now is not offered it either.
    late = await sockets(conversation, alice)
    assert late.ready["pending_confirmations"] == []


# --- any tab, any time -----------------------------------------------------------------------------


async def test_a_confirmation_survives_a_restart(llm, tools, sockets, conversation, alice, monkeypatch):
    socket = await sockets(conversation, alice)
    confirm, _ = await ask_for_deploy(llm, socket)
    await socket.close()

    # A new process: nothing in memory, only the database.
    monkeypatch.setattr(runs, "manager", runs.RunManager(registry=runs.manager.registry, provider_factory=get_provider))

    again = await sockets(conversation, alice)
    assert again.ready["run"] is None
    [pending] = again.ready["pending_confirmations"]
    assert pending["confirmation_id"] == confirm["confirmation_id"]
    assert pending["tool"] == "deploy_dashboard" and pending["tool_call_id"] == DEPLOY_CALL
    assert pending["input"] == ASKED
    assert datetime.fromisoformat(pending["expires_at"]) == datetime.fromisoformat(confirm["expires_at"])

    llm.script(Reply(text="Deployed after the restart."))
    await decide(again, pending["confirmation_id"])
    frames = await again.receive_until("run_finished")
    await expect_resumed(llm, tools, conversation, frames, ran_with=ASKED, answer="Deployed after the restart.")
    assert (await confirmation_row(pending["confirmation_id"])).status == PendingConfirmation.Status.APPROVED


async def test_a_decision_from_another_tab_streams_to_every_tab(llm, tools, sockets, conversation, alice):
    watcher = await sockets(conversation, alice)
    confirm, _ = await ask_for_deploy(llm, watcher)

    other = await sockets(conversation, alice)
    assert [p["confirmation_id"] for p in other.ready["pending_confirmations"]] == [confirm["confirmation_id"]]
    llm.script(Reply(text="Deployed from the other tab."))
    await decide(other, confirm["confirmation_id"])

    deciding = await other.receive_until("run_finished")
    watching = await watcher.receive_until("run_finished")
    await expect_resumed(llm, tools, conversation, deciding, ran_with=ASKED, answer="Deployed from the other tab.")
    await expect_resumed(llm, tools, conversation, watching, ran_with=ASKED, answer="Deployed from the other tab.")
    assert one(watching, "tool_end", tool_call_id=DEPLOY_CALL) == one(deciding, "tool_end", tool_call_id=DEPLOY_CALL)
    assert of(watching, "token") == of(deciding, "token")
    assert await watcher.quiet() and await other.quiet()


async def test_two_dangerous_calls_of_one_round_each_wait_for_their_own_decision(
    llm, tools, sockets, conversation, alice
):
    socket = await sockets(conversation, alice)
    first_args, second_args = {"dashboard_id": 7, "environment": "staging"}, {"dashboard_id": 8, "environment": "qa"}
    llm.script(
        Reply(
            tool_calls=[
                ("deploy_dashboard", first_args, "call_first"),
                ("deploy_dashboard", second_args, "call_second"),
            ]
        ),
        Reply(text="One deployed, one left alone."),
    )
    await socket.send({"type": "message", "content": "Deploy 7 and 8"})
    frames = await socket.receive_until("run_finished")
    assert frames[-1]["status"] == "awaiting_confirmation"
    first, second = of(frames, "confirm_required")
    assert (first["tool_call_id"], second["tool_call_id"]) == ("call_first", "call_second")

    # One decided, one still awaited: the decided call runs, the model is not asked yet.
    await decide(socket, first["confirmation_id"])
    frames = await socket.receive_until("run_finished")
    assert frames[-1]["status"] == "awaiting_confirmation" and not of(frames, "error"), frames
    assert one(frames, "tool_end", tool_call_id="call_first")["output"] == {"deployed": 7, "environment": "staging"}
    assert not of(frames, "token") and not of(frames, "tool_start", tool_call_id="call_second")
    assert tools.deploy == [first_args] and len(llm.requests) == 1
    assert (await confirmation_row(second["confirmation_id"])).status == PendingConfirmation.Status.PENDING

    await decide(socket, second["confirmation_id"], "reject", reason="Only one today")
    frames = await socket.receive_until("run_finished")
    assert frames[-1]["status"] == "completed" and not of(frames, "error"), frames
    assert "Only one today" in one(frames, "tool_error", tool_call_id="call_second")["error"]
    assert tools.deploy == [first_args] and len(llm.requests) == 2
    wire = after_the_call(llm.requests[1].messages)
    assert [(m["role"], m.get("tool_call_id")) for m in wire[1:]] == [("tool", "call_first"), ("tool", "call_second")]
    assert "".join(f["delta"] for f in of(frames, "token")) == "One deployed, one left alone."


async def test_an_approved_tool_is_called_like_any_other_tool_of_the_run(llm, tools, sockets, conversation, alice):
    """The page context of the message reaches every tool (docs/protocol.md), the confirmed one included."""
    socket = await sockets(conversation, alice)
    page = {"focus": {"type": "dashboard", "id": 7}}
    confirm, _ = await ask_for_deploy(llm, socket, context=page)
    llm.script(Reply(text="Deployed."))

    await decide(socket, confirm["confirmation_id"])
    frames = await socket.receive_until("run_finished")
    await expect_resumed(llm, tools, conversation, frames, ran_with=ASKED, answer="Deployed.")
    safe, dangerous = tools.contexts["lookup_dashboard"], tools.contexts["deploy_dashboard"]
    assert safe.page_context == page
    assert dangerous.user.pk == alice.pk and dangerous.conversation_id == str(conversation.pk)
    assert dangerous.page_context == page


@sync_to_async
def set_permission(user, codename: str, *, granted: bool) -> None:
    permission = Permission.objects.get(content_type__app_label="auth", codename=codename)
    (user.user_permissions.add if granted else user.user_permissions.remove)(permission)


async def test_a_permission_withdrawn_before_the_decision_is_enforced(llm, tools, sockets, conversation, alice):
    """A user never runs a tool they lack the permission for: checked when the tool runs, not only asked."""
    await set_permission(alice, "delete_group", granted=True)
    socket = await sockets(conversation, alice)
    llm.script(Reply(tool_calls=[("drop_dashboard", {"dashboard_id": 7}, "call_drop")]), Reply(text="I may not."))
    await socket.send({"type": "message", "content": "Drop dashboard 7"})
    frames = await socket.receive_until("run_finished")
    confirm = one(frames, "confirm_required", tool="drop_dashboard")
    await socket.close()

    await set_permission(alice, "delete_group", granted=False)
    again = await sockets(conversation, alice)  # a fresh sign-in: no permission cached from before
    await decide(again, confirm["confirmation_id"])
    frames = await again.receive_until("run_finished")

    assert tools.drop == []
    assert not of(frames, "tool_end", tool_call_id="call_drop"), frames
    refused = one(frames, "tool_error", tool_call_id="call_drop")
    assert "permission denied" in refused["error"]
    [result] = await tool_messages(conversation, "call_drop")
    assert result.is_error and "permission denied" in result.content
    denied = await audits(conversation, AuditEvent.Kind.PERMISSION_DENIED)
    assert [event.data["tool"] for event in denied] == ["drop_dashboard"]
    assert frames[-1]["status"] == "completed"


async def test_a_decision_sent_before_the_asking_run_has_finished_waits_for_it(
    llm, tools, sockets, conversation, alice
):
    socket = await sockets(conversation, alice)
    llm.script(
        Reply(text="Deploying now.", tool_calls=[("deploy_dashboard", ASKED, DEPLOY_CALL)]), Reply(text="Deployed.")
    )
    await socket.send({"type": "message", "content": "Deploy dashboard 7"})
    frames = await socket.receive_until("confirm_required")
    # The quickest click: the asking run may still hold the conversation's gate.
    await decide(socket, frames[-1]["confirmation_id"])
    frames += await socket.receive_until("run_finished", status="completed")

    assert not of(frames, "error"), frames
    asking, resumed = of(frames, "run_finished")
    assert asking["status"] == "awaiting_confirmation" and asking["run_id"] != resumed["run_id"]
    assert tools.deploy == [ASKED]
    assert one(frames, "tool_end", tool_call_id=DEPLOY_CALL)["run_id"] == resumed["run_id"]
    assert len(llm.requests) == 2


async def test_the_request_for_approval_comes_once_the_run_has_let_go_of_the_conversation(
    llm, tools, sockets, conversation, alice, monkeypatch
):
    """A new message sent the moment the card appears is taken, not refused as BUSY."""
    socket = await sockets(conversation, alice)
    releasing, release = asyncio.Event(), asyncio.Event()
    let_go = runs.db.release

    async def held_release(**kwargs):
        releasing.set()
        await release.wait()
        return await let_go(**kwargs)

    monkeypatch.setattr(runs.db, "release", held_release)
    llm.script(Reply(text="Deploying now.", tool_calls=[("deploy_dashboard", ASKED, DEPLOY_CALL)]))
    await socket.send({"type": "message", "content": "Deploy dashboard 7"})
    await asyncio.wait_for(releasing.wait(), timeout=10)
    before = []
    while not await socket.nothing(0.1):
        before.append(await socket.receive())
    assert not of(before, "confirm_required"), before
    release.set()

    frames = await socket.receive_until("confirm_required")
    confirm = frames[-1]
    llm.script(Reply(text="Fine, nothing deployed."))
    await socket.send({"type": "message", "content": "Never mind", "client_id": "c2"})
    frames += await socket.receive_until("run_finished", status="completed")
    assert not of(frames, "error"), frames
    assert one(frames, "message", client_id="c2")["message"]["content"] == "Never mind"
    assert (await confirmation_row(confirm["confirmation_id"])).status == PendingConfirmation.Status.SUPERSEDED


# --- exactly once: a decision is carried out once, and always ends with a result ------------------


@sync_to_async
def as_a_dead_run_left_it(confirmation_id, user, *, started: bool, job: ToolJob.Status | None = None) -> None:
    """The rows a server killed right after an approval leaves: approved, and maybe started (claimed), maybe as a
    background job; no result. Its gate lapsed long ago."""
    confirmation = PendingConfirmation.objects.get(pk=confirmation_id)
    now = timezone.now()
    confirmation.status = PendingConfirmation.Status.APPROVED
    confirmation.decided_by, confirmation.decided_at = user, now
    confirmation.claimed_at = now if started else None
    confirmation.save()
    if job is not None:
        ToolJob.objects.create(
            conversation=confirmation.conversation,
            user=user,
            run_id=uuid.uuid4(),
            tool_call_id=confirmation.tool_call_id,
            tool_name=confirmation.tool_name,
            args=confirmation.args,
            status=job,
            output={"deployed": 7, "environment": "staging", "by": "the worker"} if job == "succeeded" else None,
        )


@pytest.fixture
def restarted(monkeypatch):
    """A new server process: nothing in memory, only the database."""
    fresh = runs.RunManager(registry=runs.manager.registry, provider_factory=get_provider)
    monkeypatch.setattr(runs, "manager", fresh)
    return fresh


def assert_well_formed(request) -> None:
    """Every tool call the provider is sent has its result right after it (providers refuse anything else)."""
    expected: list[str] = []
    for message in request.messages:
        if message["role"] == "tool":
            assert message["tool_call_id"] == expected.pop(0), request.messages
        else:
            assert not expected, request.messages
            expected = [call["id"] for call in message.get("tool_calls") or []]
    assert not expected, request.messages


async def test_an_approval_whose_server_died_before_the_tool_started_runs_it_when_the_page_returns(
    llm, tools, sockets, conversation, alice, restarted
):
    first = await sockets(conversation, alice)
    confirm, _ = await ask_for_deploy(llm, first)
    await first.close()
    await as_a_dead_run_left_it(confirm["confirmation_id"], alice, started=False)

    llm.script(Reply(text="Deployed once the server was back."))
    socket = await sockets(conversation, alice)
    frames = await socket.receive_until("run_finished")

    await expect_resumed(llm, tools, conversation, frames, ran_with=ASKED, answer="Deployed once the server was back.")
    row = await confirmation_row(confirm["confirmation_id"])
    [result] = await tool_messages(conversation, DEPLOY_CALL)
    assert row.result_id == result.pk and row.claimed_at is not None and result.outcome == "done"
    assert_well_formed(llm.requests[-1])

    # Settled: opening the page again carries out nothing more.
    again = await sockets(conversation, alice)
    assert again.ready["run"] is None and again.ready["pending_confirmations"] == []
    await again.send({"type": "ping"})
    assert (await again.receive())["type"] == "pong"
    assert tools.deploy == [ASKED] and len(llm.requests) == 2


async def test_an_approval_whose_server_died_while_the_tool_ran_says_so_and_never_runs_it_again(
    llm, tools, sockets, conversation, alice, restarted
):
    first = await sockets(conversation, alice)
    confirm, _ = await ask_for_deploy(llm, first)
    await first.close()
    await as_a_dead_run_left_it(confirm["confirmation_id"], alice, started=True)

    llm.script(Reply(text="I cannot tell whether dashboard 7 was deployed; please check."))
    socket = await sockets(conversation, alice)
    frames = await socket.receive_until("run_finished")

    assert tools.deploy == []
    assert not of(frames, "tool_start") and not of(frames, "tool_end"), frames
    unknown = one(frames, "tool_error", tool_call_id=DEPLOY_CALL)
    assert unknown["outcome"] == "unknown"
    assert "stopped while deploy_dashboard was running" in unknown["error"] and "Check before" in unknown["error"]
    [result] = await tool_messages(conversation, DEPLOY_CALL)
    assert result.outcome == "unknown" and result.is_error
    assert (await confirmation_row(confirm["confirmation_id"])).result_id == result.pk
    assert frames[-1]["status"] == "completed" and not of(frames, "error"), frames
    assert_well_formed(llm.requests[-1])
    sent = [m["content"] for m in llm.requests[-1].messages if m.get("tool_call_id") == DEPLOY_CALL]
    assert sent == [result.content]


async def test_a_background_job_left_by_a_dead_server_gives_its_own_result(
    llm, tools, sockets, conversation, alice, restarted
):
    first = await sockets(conversation, alice)
    confirm, _ = await ask_for_deploy(llm, first)
    await first.close()
    await as_a_dead_run_left_it(confirm["confirmation_id"], alice, started=True, job=ToolJob.Status.SUCCEEDED)

    llm.script(Reply(text="The worker deployed it."))
    socket = await sockets(conversation, alice)
    frames = await socket.receive_until("run_finished")

    assert tools.deploy == []
    end = one(frames, "tool_end", tool_call_id=DEPLOY_CALL)
    assert end["output"] == {"deployed": 7, "environment": "staging", "by": "the worker"}
    [result] = await tool_messages(conversation, DEPLOY_CALL)
    assert result.outcome == "done" and json.loads(result.content) == end["output"]
    assert frames[-1]["status"] == "completed"
    assert_well_formed(llm.requests[-1])


async def test_stop_while_an_approved_call_runs_lets_it_finish_and_records_it(llm, tools, sockets, conversation, alice):
    socket = await sockets(conversation, alice)
    confirm, _ = await ask_for_deploy(llm, socket)
    tools.release = threading.Event()

    await decide(socket, confirm["confirmation_id"])
    await socket.receive_until("tool_start", tool_call_id=DEPLOY_CALL)
    assert await asyncio.to_thread(tools.started.wait, 5)
    await socket.send({"type": "cancel"})
    # The stop reaches the run while the deploy is still going; only then does the deploy end.
    async with asyncio.timeout(5):
        while not any(run.task.cancelling() for run in runs.manager.live.values()):
            await asyncio.sleep(0.01)
    tools.release.set()
    frames = await socket.receive_until("run_finished")

    assert frames[-1]["status"] == "cancelled", frames
    assert tools.deploy == [ASKED]
    end = one(frames, "tool_end", tool_call_id=DEPLOY_CALL)
    assert end["output"] == {"deployed": 7, "environment": "staging"}
    [result] = await tool_messages(conversation, DEPLOY_CALL)
    assert result.outcome == "done"
    assert (await confirmation_row(confirm["confirmation_id"])).result_id == result.pk
    assert len(llm.requests) == 1  # stopped: the model is not asked again


async def test_a_new_message_settles_an_approval_whose_server_died_before_it_started(
    llm, tools, sockets, conversation, alice
):
    socket = await sockets(conversation, alice)
    confirm, _ = await ask_for_deploy(llm, socket)
    await as_a_dead_run_left_it(confirm["confirmation_id"], alice, started=False)
    llm.script(Reply(text="Here are the stats."))

    await socket.send({"type": "message", "content": "Show me the stats instead", "client_id": "c2"})
    frames = await socket.receive_until("run_finished")

    assert tools.deploy == []
    assert frames[0]["type"] == "message" and frames[0]["message"]["tool_call_id"] == DEPLOY_CALL
    assert frames[0]["message"]["outcome"] == "cancelled"
    assert "new message was sent before it started" in frames[0]["message"]["content"]
    assert frames[1]["type"] == "message" and frames[1]["client_id"] == "c2"
    assert frames[-1]["status"] == "completed" and not of(frames, "error"), frames
    assert_well_formed(llm.requests[-1])
