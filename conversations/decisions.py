"""What became of each call that waited for its owner: the record its card, the history API and the export keep."""

from __future__ import annotations

from typing import Any, TypedDict

from .models import Message, PendingConfirmation


class Decision(TypedDict):
    """A decided confirmation as the history API and the `message` frames carry it on the call's tool message."""

    status: str  # approved, edited, rejected, superseded (by a new message), expired
    decided_by: str | None  # the username; None when nobody decided (superseded, expired)
    decided_at: str | None
    args: dict[str, Any]  # the arguments it ran with (the edited ones for "edited"), else those it asked for
    reason: str


def decisions_for(conversation_id) -> dict[str, PendingConfirmation]:
    """The conversation's confirmations by their call's id, with who decided each."""
    confirmations = PendingConfirmation.objects.filter(conversation_id=conversation_id).select_related("decided_by")
    return {confirmation.tool_call_id: confirmation for confirmation in confirmations}


def decision_of(confirmation: PendingConfirmation) -> Decision:
    edited = confirmation.status == PendingConfirmation.Status.EDITED
    return {
        "status": confirmation.status,
        "decided_by": confirmation.decided_by.get_username() if confirmation.decided_by else None,
        "decided_at": confirmation.decided_at.isoformat() if confirmation.decided_at else None,
        "args": confirmation.edited_args if edited else confirmation.args,
        "reason": confirmation.reason,
    }


def message_decision(message: Message, known: dict) -> Decision | None:
    """The decision a tool message settles, if its call waited for one. `known` keeps each conversation's
    confirmations once read (a serializer's context), so a page of history costs one query."""
    if message.role != Message.Role.TOOL or not message.tool_call_id:
        return None
    if message.conversation_id not in known:
        known[message.conversation_id] = decisions_for(message.conversation_id)
    confirmation = known[message.conversation_id].get(message.tool_call_id)
    if confirmation is None or confirmation.status == PendingConfirmation.Status.PENDING:
        return None
    return decision_of(confirmation)
