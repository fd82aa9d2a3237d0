"""Decided calls are settled once, with the truth: how each state a run can leave is told, and when."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from agentchat.agent.calls import ToolOutcome
from conversations import services
from conversations.exceptions import AlreadySettled
from conversations.models import Message, PendingConfirmation, ToolJob
from conversations.services import Settle

pytestmark = pytest.mark.django_db

CALL = "call_deploy"


def decided(alice, *, status="approved", claimed=False, job: str | None = None, reason=""):
    """An assistant call to deploy_dashboard and its decision, as a run that stopped would leave them."""
    conversation = services.conversation_create(owner=alice)
    services.message_append(conversation=conversation, role="user", content="Deploy dashboard 7")
    message, _ = services.message_append(
        conversation=conversation,
        role="assistant",
        tool_calls=[{"id": CALL, "name": "deploy_dashboard", "args": {"dashboard_id": 7}}],
    )
    now = timezone.now()
    confirmation = PendingConfirmation.objects.create(
        conversation=conversation,
        message=message,
        tool_call_id=CALL,
        tool_name="deploy_dashboard",
        args={"dashboard_id": 7},
        args_hash="x",
        status=status,
        reason=reason,
        decided_at=now,
        claimed_at=now if claimed else None,
        expires_at=now + timedelta(hours=1),
    )
    if job:
        ToolJob.objects.create(
            conversation=conversation,
            user=alice,
            run_id="8d1f0d8e-6d25-4c44-9d4b-0a8f1fb1f0b1",
            tool_call_id=CALL,
            tool_name="deploy_dashboard",
            status=job,
            output={"deployed": 7} if job == ToolJob.Status.SUCCEEDED else None,
        )
    return conversation, confirmation


def settled(conversation, why: Settle) -> list[tuple[str, str]]:
    return [(m.outcome, m.content) for m in services.decisions_settle(conversation=conversation, why=why)]


@pytest.mark.parametrize(
    ("state", "why", "outcome", "words"),
    [
        # Never started: the next run carries it out, unless the user stopped or moved on first.
        ({}, Settle.FAILED, None, None),
        ({}, Settle.STOPPED, "cancelled", "cancelled by the user"),
        ({}, Settle.NEW_MESSAGE, "cancelled", "not run: a new message was sent before it started"),
        # Started in a server that is gone: it may have taken effect, and is never run again.
        ({"claimed": True}, Settle.FAILED, "unknown", "stopped while deploy_dashboard was running"),
        ({"claimed": True}, Settle.STOPPED, "unknown", "Check before trying it again"),
        # A background job tells its own result; one still going is waited for, unless a new message comes.
        ({"claimed": True, "job": "succeeded"}, Settle.FAILED, "done", '{"deployed": 7}'),
        ({"claimed": True, "job": "running"}, Settle.FAILED, None, None),
        ({"claimed": True, "job": "running"}, Settle.STOPPED, None, None),
        ({"claimed": True, "job": "running"}, Settle.NEW_MESSAGE, "unknown", "stopped while deploy_dashboard"),
        ({"claimed": True, "job": "queued"}, Settle.NEW_MESSAGE, "cancelled", "a new message was sent before"),
        # A rejection is a rejection, whenever it is settled.
        (
            {"status": "rejected", "reason": "not now"},
            Settle.FAILED,
            "rejected",
            "rejected by the user. Reason: not now",
        ),
    ],
)
def test_each_state_a_decision_can_be_left_in_is_settled_truthfully(alice, state, why, outcome, words):
    conversation, confirmation = decided(alice, **state)

    results = settled(conversation, why)

    confirmation.refresh_from_db()
    if outcome is None:
        assert results == [] and confirmation.result_id is None
        return
    [(stored, content)] = results
    assert stored == outcome and words in content
    assert confirmation.result.tool_call_id == CALL and confirmation.result.outcome == outcome
    if state.get("job") == "queued":
        assert ToolJob.objects.get(tool_call_id=CALL).status == ToolJob.Status.CANCELLED
    # Settled once: nothing more is stored by a second look.
    assert settled(conversation, why) == []


def test_a_decision_is_settled_by_one_result_only(alice):
    conversation, confirmation = decided(alice, claimed=True)
    services.decisions_settle(conversation=conversation, why=Settle.FAILED)

    with pytest.raises(AlreadySettled):
        services.tool_result_store(
            conversation=conversation,
            tool_call_id=CALL,
            tool_name="deploy_dashboard",
            outcome=ToolOutcome.done({"deployed": 7}),
            run_id="",
            confirmation=confirmation,
        )
    assert Message.objects.filter(conversation=conversation, tool_call_id=CALL).count() == 1


def test_a_decided_call_is_claimed_once(alice):
    _, confirmation = decided(alice)
    assert services.confirmation_claim(confirmation=confirmation) is True
    assert services.confirmation_claim(confirmation=confirmation) is False
    rejected = decided(alice, status="rejected")[1]
    assert services.confirmation_claim(confirmation=rejected) is False
