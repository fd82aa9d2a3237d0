"""The frames a run sends (docs/protocol.md), and the channel-layer groups they travel on."""

from __future__ import annotations

from typing import Any

from ..api.serializers import MessageSerializer
from ..models import Message, PendingConfirmation


def conversation_group(conversation_id) -> str:
    """Every socket of the conversation, on every process."""
    return f"chat.{conversation_id}"


# One channel of each process: cancels, and requests for a live run's text so far, for whichever process runs it.
CONTROL_GROUP = "runs.control"


def message_frame(message: Message, client_id: str | None = None) -> dict[str, Any]:
    frame: dict[str, Any] = {"type": "message", "message": MessageSerializer(message).data}
    if client_id:
        frame["client_id"] = client_id
    return frame


def confirmation_frame(confirmation: PendingConfirmation) -> dict[str, Any]:
    # The run manager, set up by this package once its modules are loaded: its registry has the tools runs call.
    from . import manager

    tool = manager.registry.find(confirmation.tool_name)
    return {
        "type": "confirm_required",
        "confirmation_id": str(confirmation.pk),
        "tool_call_id": confirmation.tool_call_id,
        "tool": confirmation.tool_name,
        "input": confirmation.args,
        "expires_at": confirmation.expires_at.isoformat(),
        "schema": tool.schema()["parameters"] if tool else None,
    }


def notice(code: str, detail: str) -> dict[str, Any]:
    return {"type": "notice", "code": code, "detail": detail}
