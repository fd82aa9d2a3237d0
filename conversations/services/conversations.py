"""Conversations: create, rename, archive (a soft delete) and restore; the start page's drafts."""

from __future__ import annotations

from datetime import timedelta

from django.db import transaction
from django.utils import timezone

from ..models import Attachment, AuditEvent, Conversation, PendingConfirmation
from .audit import audit_record

TITLE_LENGTH = 60
# How long a draft waits for its first message: a start page left open longer loses its files.
DRAFT_LIFETIME = timedelta(days=1)


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


def conversation_draft(*, owner) -> Conversation:
    """A conversation for the files attached on the start page before its first message, listed nowhere until
    conversation_begin. The drafts nobody began in time are discarded here, as a new one is made."""
    drafts_discard(before=timezone.now() - DRAFT_LIFETIME)
    conversation = Conversation.objects.create(owner=owner, is_draft=True)
    audit_record(
        kind=AuditEvent.Kind.CONVERSATION_CREATED,
        actor=owner,
        conversation=conversation,
        data={"title": "", "draft": True},
    )
    return conversation


def conversation_begin(*, conversation: Conversation) -> bool:
    """The draft becomes a conversation like any other, as its first message is sent; False when it is no longer a
    draft (begun already, or discarded)."""
    begun = Conversation.objects.filter(pk=conversation.pk, is_draft=True).update(
        is_draft=False, updated_at=timezone.now()
    )
    return bool(begun)


@transaction.atomic
def drafts_discard(*, before) -> None:
    """Delete the drafts made before `before` that never got a message, with their files (once that is done)."""
    drafts = Conversation.objects.filter(is_draft=True, created_at__lt=before, messages__isnull=True)
    files = [
        (field.storage, field.name)
        for attachment in Attachment.objects.filter(conversation__in=drafts)
        for field in (attachment.file, attachment.content)
        if field
    ]
    drafts.delete()

    def delete_files() -> None:
        for storage, name in files:
            storage.delete(name)

    transaction.on_commit(delete_files)


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
