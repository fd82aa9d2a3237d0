"""Conversations: create, rename, archive (a soft delete) and restore."""

from __future__ import annotations

from django.db import transaction
from django.utils import timezone

from ..models import AuditEvent, Conversation, PendingConfirmation
from .audit import audit_record

TITLE_LENGTH = 60


def title_from_text(text: str, *, limit: int = TITLE_LENGTH) -> str:
    """`text` on one line, cut to `limit` characters at the last word boundary that fits."""
    words = " ".join(text.split())
    if len(words) <= limit:
        return words
    head = words[: limit + 1]
    cut = head.rsplit(" ", 1)[0] if " " in head else words[:limit]
    return cut.rstrip(" ,.;:-") or words[:limit]


def conversation_create(*, owner, title: str = "") -> Conversation:
    conversation = Conversation.objects.create(owner=owner, title=title.strip())
    audit_record(
        kind=AuditEvent.Kind.CONVERSATION_CREATED,
        actor=owner,
        conversation=conversation,
        data={"title": conversation.title},
    )
    return conversation


def conversation_rename(*, conversation: Conversation, title: str, actor) -> Conversation:
    old = conversation.title
    conversation.title = title.strip()
    conversation.save(update_fields=["title", "updated_at"])
    audit_record(
        kind=AuditEvent.Kind.CONVERSATION_RENAMED,
        actor=actor,
        conversation=conversation,
        data={"from": old, "to": conversation.title},
    )
    return conversation


@transaction.atomic
def conversation_archive(*, conversation: Conversation, actor) -> Conversation:
    """Soft delete: hidden from the active list, nothing removed, pending confirmations cleared."""
    if conversation.is_archived:
        return conversation
    now = timezone.now()
    cleared = conversation.confirmations.filter(status=PendingConfirmation.Status.PENDING).update(
        status=PendingConfirmation.Status.EXPIRED, decided_at=now, reason="The conversation was archived."
    )
    conversation.is_archived = True
    conversation.archived_at = now
    conversation.save(update_fields=["is_archived", "archived_at", "updated_at"])
    audit_record(
        kind=AuditEvent.Kind.CONVERSATION_ARCHIVED,
        actor=actor,
        conversation=conversation,
        data={"confirmations_cleared": cleared},
    )
    return conversation


def conversation_restore(*, conversation: Conversation, actor) -> Conversation:
    if not conversation.is_archived:
        return conversation
    conversation.is_archived = False
    conversation.archived_at = None
    conversation.save(update_fields=["is_archived", "archived_at", "updated_at"])
    audit_record(kind=AuditEvent.Kind.CONVERSATION_RESTORED, actor=actor, conversation=conversation)
    return conversation
