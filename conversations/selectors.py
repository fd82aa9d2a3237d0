"""Reads, always scoped to the user who asks."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import TypedDict

from django.conf import settings
from django.db.models import Count, QuerySet
from django.utils import timezone

from agentchat.agent.providers import ChatMessage

from .models import Conversation, Message, PendingConfirmation


class ActiveRun(TypedDict):
    active: bool
    run_id: uuid.UUID | None
    since: datetime | None


def conversations_for(user, *, archived: bool | None = False, search: str = "") -> QuerySet[Conversation]:
    """The user's conversations, newest first; `archived=None` gives both kinds."""
    queryset = Conversation.objects.filter(owner=user).annotate(message_count=Count("messages"))
    if archived is not None:
        queryset = queryset.filter(is_archived=archived)
    if search:
        queryset = queryset.filter(title__icontains=search)
    return queryset.order_by("-updated_at", "-created_at")


def history_for(conversation: Conversation) -> QuerySet[Message]:
    """The conversation's messages, oldest first, with their attachment ids at hand."""
    return conversation.messages.prefetch_related("attachments").order_by("created_at", "id")


def conversation_active_run(conversation: Conversation) -> ActiveRun:
    """The truth of the one-run gate: a marker whose heartbeat lapsed belongs to a dead process."""
    lapsed = (
        conversation.active_run_heartbeat is None
        or conversation.active_run_heartbeat < timezone.now() - settings.RUN_HEARTBEAT_TIMEOUT
    )
    if conversation.active_run_id is None or lapsed:
        return {"active": False, "run_id": None, "since": None}
    return {
        "active": True,
        "run_id": conversation.active_run_id,
        "since": conversation.active_run_since,
    }


def conversation_for(user, conversation_id) -> Conversation | None:
    return Conversation.objects.filter(owner=user, pk=conversation_id).first()


def pending_confirmations(conversation: Conversation) -> QuerySet[PendingConfirmation]:
    return conversation.confirmations.filter(
        status=PendingConfirmation.Status.PENDING, expires_at__gt=timezone.now()
    ).order_by("created_at")


def provider_history(conversation: Conversation) -> list[ChatMessage]:
    """The conversation as the engine sees it: finished messages only, every tool call followed by its result."""
    history: list[ChatMessage] = []
    for message in conversation.messages.exclude(status=Message.Status.STREAMING).order_by("created_at", "id"):
        if message.role == Message.Role.ASSISTANT:
            if not message.content and not message.tool_calls:
                continue
            entry: ChatMessage = {"role": "assistant", "content": message.content}
            if message.tool_calls:
                entry["tool_calls"] = message.tool_calls
            history.append(entry)
        elif message.role == Message.Role.TOOL:
            history.append(
                {
                    "role": "tool",
                    "content": message.content,
                    "tool_call_id": message.tool_call_id,
                    "name": message.tool_name,
                }
            )
        else:
            history.append({"role": message.role, "content": message.content})
    return history


def last_user_context(conversation: Conversation) -> dict:
    """The page context sent with the newest user message: what "it" refers to."""
    message = conversation.messages.filter(role=Message.Role.USER).order_by("-created_at", "-id").first()
    return (message.metadata.get("context") or {}) if message else {}


def streaming_snapshot(conversation: Conversation) -> dict | None:
    """The text of a live run as of its last flush, for when its process does not answer in time."""
    conversation.refresh_from_db()
    active = conversation_active_run(conversation)
    if not active["active"]:
        return None
    message = conversation.messages.filter(status=Message.Status.STREAMING).order_by("-id").first()
    return {
        "run_id": str(active["run_id"]),
        "message_id": message.pk if message else None,
        "status": "streaming",
        "content": message.content if message else "",
        "seq": 0,
    }
