"""The audit log: append-only, one row per thing that happened."""

from __future__ import annotations

from typing import Any

from ..models import AuditEvent, Conversation
from ..sql import insert


def audit_record(
    *, kind: str, actor=None, conversation: Conversation | None = None, data: dict[str, Any] | None = None
) -> AuditEvent:
    """One row, stored with an INSERT built once (sql.insert): every run ends with one."""
    event = AuditEvent(
        kind=kind,
        actor=actor if actor is not None and actor.is_authenticated else None,
        conversation=conversation,
        data=data or {},
    )
    insert([event])
    return event


def audit_login_failure(sender, credentials: dict, request=None, **kwargs) -> None:
    """Receiver of Django's user_login_failed: the session form and the JWT endpoint both end here."""
    data = {
        "username": str(credentials.get("username", ""))[:150],
        "path": request.path if request is not None else "",
    }
    # axes' receiver of the same signal ran first (settings.INSTALLED_APPS): the failure that locks, and each attempt
    # refused while locked, are marked.
    if getattr(request, "axes_locked_out", False):
        data["locked_out"] = True
    audit_record(kind=AuditEvent.Kind.AUTH_FAILED, data=data)
