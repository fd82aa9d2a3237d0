"""Writes. Every change to conversations goes through here, with its audit event."""

from __future__ import annotations

import uuid
from typing import Any

from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import Q
from django.utils import timezone

from .models import AuditEvent, Conversation, Message, PendingConfirmation

TITLE_LENGTH = 60


def title_from_text(text: str, *, limit: int = TITLE_LENGTH) -> str:
    """`text` on one line, cut to `limit` characters at the last word boundary that fits."""
    words = " ".join(text.split())
    if len(words) <= limit:
        return words
    head = words[: limit + 1]
    cut = head.rsplit(" ", 1)[0] if " " in head else words[:limit]
    return cut.rstrip(" ,.;:-") or words[:limit]


def audit_record(
    *, kind: str, actor=None, conversation: Conversation | None = None, data: dict[str, Any] | None = None
) -> AuditEvent:
    return AuditEvent.objects.create(
        kind=kind,
        actor=actor if actor is not None and actor.is_authenticated else None,
        conversation=conversation,
        data=data or {},
    )


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


def message_append(
    *,
    conversation: Conversation,
    role: str,
    content: str = "",
    client_id: str | None = None,
    actor=None,
    **fields: Any,
) -> tuple[Message, bool]:
    """Store a message; the same `client_id` twice gives back the first one and `created=False`."""
    if client_id:
        existing = Message.objects.filter(conversation=conversation, client_id=client_id).first()
        if existing:
            return existing, False
    try:
        with transaction.atomic():
            message = Message.objects.create(
                conversation=conversation, role=role, content=content, client_id=client_id or None, **fields
            )
            if role == Message.Role.USER and not conversation.title:
                conversation.title = title_from_text(content)
            conversation.save(update_fields=["title", "updated_at"])
            if role == Message.Role.USER:
                audit_record(
                    kind=AuditEvent.Kind.MESSAGE_SENT,
                    actor=actor,
                    conversation=conversation,
                    data={"message_id": message.pk, "client_id": client_id, "length": len(content)},
                )
    except IntegrityError:
        # Two sockets sent the same client_id at the same moment: the other one won.
        if client_id:
            existing = Message.objects.filter(conversation=conversation, client_id=client_id).first()
            if existing:
                return existing, False
        raise
    return message, True


def conversation_run_claim(*, conversation: Conversation) -> uuid.UUID | None:
    """Take the one-run gate atomically, unless a live run holds it; None when one does."""
    run_id = uuid.uuid4()
    now = timezone.now()
    stale_before = now - settings.RUN_HEARTBEAT_TIMEOUT
    taken = Conversation.objects.filter(
        Q(active_run_id__isnull=True) | Q(active_run_heartbeat__lt=stale_before), pk=conversation.pk
    ).update(active_run_id=run_id, active_run_since=now, active_run_heartbeat=now)
    return run_id if taken else None


def conversation_run_heartbeat(*, conversation: Conversation, run_id: uuid.UUID) -> bool:
    """Refresh the holder's heartbeat; False means the gate is no longer ours."""
    return bool(
        Conversation.objects.filter(pk=conversation.pk, active_run_id=run_id).update(
            active_run_heartbeat=timezone.now()
        )
    )


def conversation_run_release(*, conversation: Conversation, run_id: uuid.UUID) -> None:
    Conversation.objects.filter(pk=conversation.pk, active_run_id=run_id).update(
        active_run_id=None, active_run_since=None, active_run_heartbeat=None
    )


def audit_login_failure(sender, credentials: dict, request=None, **kwargs) -> None:
    """Receiver of Django's user_login_failed: the session form and the JWT endpoint both end here."""
    audit_record(
        kind=AuditEvent.Kind.AUTH_FAILED,
        data={
            "username": str(credentials.get("username", ""))[:150],
            "path": request.path if request is not None else "",
        },
    )
