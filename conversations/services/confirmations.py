"""Confirmations of dangerous calls: asked for, decided once, claimed as they start."""

from __future__ import annotations

import hashlib
import json
from typing import Any

from django.conf import settings
from django.utils import timezone

from ..models import AuditEvent, Conversation, PendingConfirmation
from .audit import audit_record


def args_hash(args: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(args, sort_keys=True, default=str).encode()).hexdigest()


def confirmation_request(
    *, conversation: Conversation, message_id: int | None, tool_call_id: str, tool_name: str, args: dict, actor
) -> PendingConfirmation:
    confirmation = PendingConfirmation.objects.create(
        conversation=conversation,
        message_id=message_id,
        tool_call_id=tool_call_id,
        tool_name=tool_name,
        args=args,
        args_hash=args_hash(args),
        expires_at=timezone.now() + settings.CONFIRMATION_TTL,
    )
    audit_record(
        kind=AuditEvent.Kind.CONFIRMATION_REQUESTED,
        actor=actor,
        conversation=conversation,
        data={"confirmation_id": str(confirmation.pk), "tool": tool_name, "args": args},
    )
    return confirmation


DECISION_STATUS = {
    "approve": PendingConfirmation.Status.APPROVED,
    "edit": PendingConfirmation.Status.EDITED,
    "reject": PendingConfirmation.Status.REJECTED,
}


def confirmation_decide(
    *, confirmation: PendingConfirmation, decision: str, actor, args: dict | None = None, reason: str = ""
) -> bool:
    """Take the decision once: one conditional UPDATE, so two tabs deciding together cannot both win."""
    now = timezone.now()
    taken = PendingConfirmation.objects.filter(
        pk=confirmation.pk,
        status=PendingConfirmation.Status.PENDING,
        expires_at__gt=now,
        conversation__is_archived=False,
    ).update(
        status=DECISION_STATUS[decision],
        decided_by=actor,
        decided_at=now,
        edited_args=args if decision == "edit" else None,
        reason=reason,
    )
    if taken:
        audit_record(
            kind=AuditEvent.Kind.CONFIRMATION_DECIDED,
            actor=actor,
            conversation=confirmation.conversation,
            data={
                "confirmation_id": str(confirmation.pk),
                "tool": confirmation.tool_name,
                "decision": decision,
                "args": confirmation.args,
                "edited_args": args if decision == "edit" else None,
                "reason": reason,
            },
        )
    return bool(taken)


def confirmation_claim(*, confirmation: PendingConfirmation) -> bool:
    """Mark a decided call as started, once: from here on a crash leaves it "may have run", never "run it again"."""
    return bool(
        PendingConfirmation.objects.filter(
            pk=confirmation.pk, status__in=[PendingConfirmation.Status.APPROVED, PendingConfirmation.Status.EDITED],
            claimed_at__isnull=True, result__isnull=True,
        ).update(claimed_at=timezone.now())
    )  # fmt: skip
