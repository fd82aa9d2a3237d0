"""What the socket tests look for in the frames a page receives, and in what was stored."""

from __future__ import annotations

from typing import Any

from asgiref.sync import sync_to_async

from conversations.models import Message


def of(frames: list[dict[str, Any]], kind: str, **match) -> list[dict[str, Any]]:
    """The frames of type `kind` whose fields have the values given."""
    return [f for f in frames if f["type"] == kind and all(f.get(key) == value for key, value in match.items())]


def text_of(frames: list[dict]) -> str:
    return "".join(frame["delta"] for frame in of(frames, "token"))


def well_formed(messages: list[dict]) -> None:
    """Provider history: no tool message without its assistant call right before it (after its siblings)."""
    for index, message in enumerate(messages):
        if message["role"] != "tool":
            continue
        before = index - 1
        while before >= 0 and messages[before]["role"] == "tool":
            before -= 1
        assert before >= 0, messages
        call = messages[before]
        assert call["role"] == "assistant", messages
        assert message["tool_call_id"] in {c["id"] for c in call.get("tool_calls") or []}, messages


def one(frames: list[dict[str, Any]], kind: str, **match) -> dict[str, Any]:
    found = of(frames, kind, **match)
    assert len(found) == 1, (kind, match, [f["type"] for f in frames])
    return found[0]


@sync_to_async
def tool_messages(conversation, call_id: str | None = None) -> list[Message]:
    """The stored tool results, oldest first; with `call_id`, that call's."""
    queryset = Message.objects.filter(conversation=conversation, role=Message.Role.TOOL)
    if call_id:
        queryset = queryset.filter(tool_call_id=call_id)
    return list(queryset.order_by("created_at", "id"))
