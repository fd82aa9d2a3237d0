"""Writes. Every change to conversations goes through here, with its audit event; one module an area."""

from __future__ import annotations

from .attachments import attachment_name, attachment_reject, attachment_upload
from .audit import audit_login_failure, audit_record
from .confirmations import args_hash, confirmation_claim, confirmation_decide, confirmation_request
from .conversations import (
    conversation_archive,
    conversation_begin,
    conversation_create,
    conversation_draft,
    conversation_rename,
    conversation_restore,
    title_from_text,
)
from .intake import Intake, message_intake, state_read
from .jobs import (
    job_outcome,
    tool_job_beat,
    tool_job_cancel,
    tool_job_check,
    tool_job_enqueue,
    tool_job_finish,
    tool_job_start,
)
from .messages import (
    CANCELLED_BY_USER,
    INTERRUPTED,
    assistant_message_discard,
    assistant_message_save,
    assistant_message_start,
    assistant_messages_flush,
    dangling_calls_close,
    message_append,
    tool_result_store,
)
from .run_gate import (
    conversation_recover,
    conversation_run_claim,
    conversation_run_heartbeat,
    conversation_run_release,
    run_begin,
    run_open,
)
from .settle import Settle, confirmations_supersede, decision_outcome, decisions_settle
from .turns import MAX_CONTEXT_DEPTH, Turn, context_too_deep
from .usage import usage_record

__all__ = [
    "CANCELLED_BY_USER",
    "INTERRUPTED",
    "MAX_CONTEXT_DEPTH",
    "Intake",
    "Settle",
    "Turn",
    "args_hash",
    "assistant_message_discard",
    "assistant_message_save",
    "assistant_message_start",
    "assistant_messages_flush",
    "attachment_name",
    "attachment_reject",
    "attachment_upload",
    "audit_login_failure",
    "audit_record",
    "confirmation_claim",
    "confirmation_decide",
    "confirmation_request",
    "confirmations_supersede",
    "context_too_deep",
    "conversation_archive",
    "conversation_begin",
    "conversation_create",
    "conversation_draft",
    "conversation_recover",
    "conversation_rename",
    "conversation_restore",
    "conversation_run_claim",
    "conversation_run_heartbeat",
    "conversation_run_release",
    "dangling_calls_close",
    "decision_outcome",
    "decisions_settle",
    "job_outcome",
    "message_append",
    "message_intake",
    "run_begin",
    "run_open",
    "state_read",
    "title_from_text",
    "tool_job_beat",
    "tool_job_cancel",
    "tool_job_check",
    "tool_job_enqueue",
    "tool_job_finish",
    "tool_job_start",
    "tool_result_store",
    "usage_record",
]
