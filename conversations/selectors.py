"""Reads, always scoped to the user who asks."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import TypedDict

from django.conf import settings
from django.db.models import Count, QuerySet
from django.utils import timezone

from .models import Conversation, Message


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
