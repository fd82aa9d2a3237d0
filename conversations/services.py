"""Writes. Every change to conversations goes through here, with its audit event."""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
import unicodedata
import uuid
from enum import StrEnum
from pathlib import PurePosixPath, PureWindowsPath
from typing import Any

from django.conf import settings
from django.core.files import File
from django.core.files.uploadedfile import UploadedFile
from django.db import IntegrityError, transaction
from django.db.models import F
from django.utils import timezone

from agentchat.agent.calls import Outcome, ToolOutcome
from tools.documents import sandbox
from tools.documents.exceptions import DocumentError, FileTooLarge
from tools.documents.limits import DEFAULT_LIMITS, MAX_UPLOAD_BYTES, MiB

from . import selectors
from .exceptions import AlreadySettled
from .models import Attachment, AuditEvent, Conversation, Message, PendingConfirmation, ToolJob

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
            # A person's message moves the conversation up; the rest of a run moves it when the run ends (release).
            if role == Message.Role.USER:
                conversation.title = conversation.title or title_from_text(content)
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
    """Take the one-run gate atomically, unless a live run holds it; None when one does.

    Taking it over from a run whose heartbeat lapsed (its process died) tidies what that run left behind.
    """
    run_id = uuid.uuid4()
    now = timezone.now()
    claim = {"active_run_id": run_id, "active_run_since": now, "active_run_heartbeat": now}
    conversations = Conversation.objects.filter(pk=conversation.pk)
    if conversations.filter(active_run_id__isnull=True).update(**claim):
        return run_id
    with transaction.atomic():
        if not conversations.filter(active_run_heartbeat__lt=now - settings.RUN_HEARTBEAT_TIMEOUT).update(**claim):
            return None
        conversation_recover(conversation=conversation)
    return run_id


def conversation_run_heartbeat(*, conversation: Conversation, run_id: uuid.UUID) -> bool:
    """Refresh the holder's heartbeat; False means the gate is no longer ours."""
    return bool(
        Conversation.objects.filter(pk=conversation.pk, active_run_id=run_id).update(
            active_run_heartbeat=timezone.now()
        )
    )


def conversation_run_release(*, conversation: Conversation, run_id: uuid.UUID) -> None:
    Conversation.objects.filter(pk=conversation.pk, active_run_id=run_id).update(
        active_run_id=None, active_run_since=None, active_run_heartbeat=None, updated_at=timezone.now()
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


# --- runs: what a live run writes ----------------------------------------------------------------

CANCELLED_BY_USER = "cancelled by the user"
INTERRUPTED = "not run: the answer was interrupted"


def assistant_message_start(*, conversation: Conversation, run_id: str) -> Message:
    return Message.objects.create(
        conversation=conversation,
        role=Message.Role.ASSISTANT,
        status=Message.Status.STREAMING,
        metadata={"run_id": run_id},
    )


def assistant_message_save(*, message_id: int, content: str, status: str, tool_calls: list | None = None) -> None:
    fields: dict[str, Any] = {"content": content, "status": status}
    if tool_calls is not None:
        fields["tool_calls"] = tool_calls
    Message.objects.filter(pk=message_id).update(**fields)


def assistant_message_flush(*, message_id: int, content: str) -> None:
    """The text so far of an answer still streaming; never overwrites the answer's final write."""
    Message.objects.filter(pk=message_id, status=Message.Status.STREAMING).update(content=content)


def assistant_message_discard(*, message_id: int) -> None:
    """A placeholder that never got a word or a call is not worth keeping."""
    Message.objects.filter(pk=message_id, content="", tool_calls=[]).delete()


def tool_result_store(
    *,
    conversation: Conversation,
    tool_call_id: str,
    tool_name: str,
    outcome: ToolOutcome,
    run_id: str,
    confirmation: PendingConfirmation | None = None,
) -> Message:
    """Store how a call ended; for a decided call, settle its confirmation with it in the same transaction.

    A decided call is settled once: should another result have settled it first, nothing is stored and
    AlreadySettled says so.
    """
    with transaction.atomic():
        message, _ = message_append(
            conversation=conversation,
            role=Message.Role.TOOL,
            content=outcome.content,
            tool_call_id=tool_call_id,
            tool_name=tool_name,
            is_error=not outcome.ok,
            outcome=outcome.outcome,
            metadata={"run_id": run_id},
        )
        if confirmation is not None and not (
            PendingConfirmation.objects.filter(pk=confirmation.pk, result__isnull=True).update(result=message)
        ):
            raise AlreadySettled(f"The call {tool_call_id} has its result already.")
    return message


def confirmation_claim(*, confirmation: PendingConfirmation) -> bool:
    """Mark a decided call as started, once: from here on a crash leaves it "may have run", never "run it again"."""
    return bool(
        PendingConfirmation.objects.filter(
            pk=confirmation.pk, status__in=[PendingConfirmation.Status.APPROVED, PendingConfirmation.Status.EDITED],
            claimed_at__isnull=True, result__isnull=True,
        ).update(claimed_at=timezone.now())
    )  # fmt: skip


def dangling_calls_close(
    *, conversation: Conversation, why: ToolOutcome, run_id: str = "", only_that_run: bool = False
) -> list[Message]:
    """Give every call left without a result a tool message saying why, after a cancel or a crash, so the
    history stays well-formed for the next provider call.

    Calls that went to their owner for a decision are left to decisions_settle. With `only_that_run`, only
    the calls made by run `run_id` are closed.
    """
    answered = set(conversation.messages.filter(role=Message.Role.TOOL).values_list("tool_call_id", flat=True))
    gated = set(conversation.confirmations.values_list("tool_call_id", flat=True))
    callers = conversation.messages.filter(role=Message.Role.ASSISTANT).exclude(tool_calls=[])
    if only_that_run:
        callers = callers.filter(metadata__run_id=run_id)
    return [
        tool_result_store(
            conversation=conversation, tool_call_id=call["id"], tool_name=call["name"], outcome=why, run_id=run_id
        )
        for message in callers
        for call in message.tool_calls
        if call["id"] not in answered and call["id"] not in gated
    ]


class Settle(StrEnum):
    """Why decided calls are being settled without being carried out now."""

    STOPPED = "stopped"  # the user stopped the run
    FAILED = "failed"  # the run failed, or its process died
    NEW_MESSAGE = "new_message"  # a new message comes before them


def job_outcome(job: ToolJob) -> ToolOutcome:
    if job.status == ToolJob.Status.SUCCEEDED:
        return ToolOutcome.done(job.output)
    if job.status == ToolJob.Status.CANCELLED:
        return ToolOutcome.cancelled(job.error or f"{job.tool_name} was cancelled before it started.")
    return ToolOutcome(Outcome(job.outcome or Outcome.ERROR), error=job.error or f"{job.tool_name} failed.")


def decision_outcome(confirmation: PendingConfirmation, job: ToolJob | None) -> ToolOutcome | None:
    """How a decided call that has no result ended, when that can be told without running it; None when it
    never started, or when its background job is still going."""
    if confirmation.status == PendingConfirmation.Status.REJECTED:
        return ToolOutcome.rejected(confirmation.reason)
    if confirmation.claimed_at is None:
        return None
    if job is None:
        return ToolOutcome.unknown(confirmation.tool_name)
    return job_outcome(job) if job.status in ToolJob.FINISHED else None


def decisions_settle(*, conversation: Conversation, why: Settle, run_id: str = "") -> list[Message]:
    """Store a result for the decided calls that have none and will not be carried out now.

    Said as it is: a rejection; a call that started in this server and has no result "may have run"
    (Outcome.UNKNOWN), never "run it again"; a finished background job's own result. An approved call that
    never started is left for the next run to carry out, unless the user stopped the run or sent a new
    message first; a background job still running is left for the next run to wait for, unless a new
    message comes first.
    """
    settled = []
    for confirmation in selectors.confirmations_unsettled(conversation):
        job = selectors.tool_job_for(conversation, confirmation.tool_call_id)
        outcome = decision_outcome(confirmation, job)
        if outcome is None and confirmation.claimed_at is None and why != Settle.FAILED:
            outcome = ToolOutcome.cancelled(
                CANCELLED_BY_USER if why == Settle.STOPPED else "not run: a new message was sent before it started."
            )
        elif outcome is None and job is not None and why == Settle.NEW_MESSAGE:
            outcome = (
                ToolOutcome.cancelled("not run: a new message was sent before it started.")
                if tool_job_cancel(job_id=job.pk, only_queued=True)
                else ToolOutcome.unknown(confirmation.tool_name)
            )
        if outcome is None:
            continue
        settled.append(
            tool_result_store(
                conversation=conversation,
                tool_call_id=confirmation.tool_call_id,
                tool_name=confirmation.tool_name,
                outcome=outcome,
                run_id=run_id,
                confirmation=confirmation,
            )
        )
    return settled


@transaction.atomic
def conversation_recover(*, conversation: Conversation, run_id: str | None = None) -> None:
    """What a dead run left behind: its streaming answer becomes `interrupted`, its calls get a result.

    Without `run_id` (a run that just took the gate) everything still streaming is a dead run's; with it,
    only that run's messages are touched, since the gate may already belong to a new run. Decided calls are
    left to the next run, which carries them out or tells how they ended before anything else (runs.resume
    starts one as soon as a page joins); their background jobs go on, for that run to wait for.
    """
    messages = Message.objects.filter(conversation=conversation, status=Message.Status.STREAMING)
    if run_id:
        messages = messages.filter(metadata__run_id=run_id)
    messages.update(status=Message.Status.INTERRUPTED)
    # Nobody waits for the dead run's other background jobs any more: a queued one need not start.
    jobs = ToolJob.objects.filter(conversation=conversation, status__in=ToolJob.OPEN).exclude(
        tool_call_id__in=conversation.confirmations.values("tool_call_id")
    )
    if run_id:
        jobs = jobs.filter(run_id=run_id)
    jobs.update(status=ToolJob.Status.CANCELLED, error=INTERRUPTED, finished_at=timezone.now())
    dangling_calls_close(
        conversation=conversation,
        why=ToolOutcome.cancelled(INTERRUPTED),
        run_id=run_id or "",
        only_that_run=bool(run_id),
    )


@transaction.atomic
def conversation_recover_lapsed(*, conversation: Conversation) -> None:
    """A run whose heartbeat lapsed (its process died) gives up the gate, and what it left is tidied."""
    stale_before = timezone.now() - settings.RUN_HEARTBEAT_TIMEOUT
    lapsed = (
        Conversation.objects.select_for_update()
        .filter(pk=conversation.pk, active_run_id__isnull=False, active_run_heartbeat__lt=stale_before)
        .values_list("active_run_id", flat=True)
        .first()
    )
    if lapsed is None:
        return
    Conversation.objects.filter(pk=conversation.pk, active_run_id=lapsed).update(
        active_run_id=None, active_run_since=None, active_run_heartbeat=None
    )
    conversation_recover(conversation=conversation, run_id=str(lapsed))
    conversation.refresh_from_db()


# --- confirmations --------------------------------------------------------------------------------


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


def confirmations_supersede(*, conversation: Conversation, actor) -> list[Message]:
    """A new user message: pending decisions lapse, decided calls not carried out are settled, and their tool
    messages (returned) say so, ahead of the new message."""
    now = timezone.now()
    lapsed = []
    for confirmation in conversation.confirmations.filter(status=PendingConfirmation.Status.PENDING):
        status = (
            PendingConfirmation.Status.EXPIRED
            if confirmation.expires_at <= now
            else PendingConfirmation.Status.SUPERSEDED
        )
        with transaction.atomic():
            # Conditional, like a decision: whichever of the two lands first wins, the other changes nothing.
            if not PendingConfirmation.objects.filter(
                pk=confirmation.pk, status=PendingConfirmation.Status.PENDING
            ).update(status=status, decided_at=now):
                continue
            expired = status == PendingConfirmation.Status.EXPIRED
            message = tool_result_store(
                conversation=conversation,
                tool_call_id=confirmation.tool_call_id,
                tool_name=confirmation.tool_name,
                outcome=ToolOutcome.cancelled(
                    "not run: "
                    + (
                        "the user did not decide in time."
                        if expired
                        else "the user sent a new message instead of deciding."
                    )
                ),
                run_id="",
            )
            audit_record(
                kind=AuditEvent.Kind.CONFIRMATION_DECIDED,
                actor=actor,
                conversation=conversation,
                data={"confirmation_id": str(confirmation.pk), "tool": confirmation.tool_name, "decision": status},
            )
        lapsed.append(message)
    return lapsed + decisions_settle(conversation=conversation, why=Settle.NEW_MESSAGE)


# --- slow tools: background jobs ------------------------------------------------------------------

WORKER_LOST = "the background worker stopped while running"


@transaction.atomic
def tool_job_enqueue(
    *,
    conversation: Conversation,
    user,
    run_id: str,
    tool,
    tool_call_id: str,
    args: dict,
    claim: PendingConfirmation | None = None,
) -> ToolJob:
    """Store the job and queue it for the worker in one transaction: both or neither, with the decided call's
    claim (`claim`) too, so that a claimed call always has the job that tells how it went."""
    if claim is not None and not confirmation_claim(confirmation=claim):
        raise AlreadySettled(f"The call {tool_call_id} was started by another run.")
    job = ToolJob.objects.create(
        conversation=conversation,
        user=user,
        run_id=run_id,
        tool_call_id=tool_call_id,
        tool_name=tool.name,
        args=args,
        # Running a confirmed call again could repeat what the user approved once.
        max_attempts=1 if tool.requires_confirmation else settings.JOB_MAX_ATTEMPTS,
    )
    _queue(job.pk, job.attempt)
    return job


def _queue(job_id, attempt: int) -> None:
    from .tasks import run_tool_job  # the task module imports this one

    run_tool_job.enqueue(str(job_id), attempt)


def tool_job_start(*, job_id: str, attempt: int) -> bool:
    """The worker takes the job; False when it was cancelled or another attempt replaced this one."""
    now = timezone.now()
    return bool(
        ToolJob.objects.filter(pk=job_id, status=ToolJob.Status.QUEUED, attempt=attempt).update(
            status=ToolJob.Status.RUNNING, started_at=now, heartbeat_at=now
        )
    )


def tool_job_beat(*, job_id: str, attempt: int) -> bool:
    return bool(
        ToolJob.objects.filter(pk=job_id, status=ToolJob.Status.RUNNING, attempt=attempt).update(
            heartbeat_at=timezone.now()
        )
    )


def tool_job_finish(*, job_id: str, attempt: int, outcome: ToolOutcome) -> bool:
    """Store the outcome, only if this attempt still holds the job (not cancelled, not given up as lost)."""
    return bool(
        ToolJob.objects.filter(pk=job_id, status=ToolJob.Status.RUNNING, attempt=attempt).update(
            status=ToolJob.Status.SUCCEEDED if outcome.ok else ToolJob.Status.FAILED,
            output=_without_nul(outcome.output) if outcome.ok else None,
            error=outcome.error,
            outcome=outcome.outcome,
            finished_at=timezone.now(),
        )
    )


@transaction.atomic
def tool_job_check(*, job_id: str) -> ToolJob:
    """The job as it stands; one whose worker stopped beating is queued again, or failed when out of attempts."""
    job = ToolJob.objects.get(pk=job_id)
    stale_before = timezone.now() - settings.JOB_HEARTBEAT_TIMEOUT
    if job.status != ToolJob.Status.RUNNING or job.heartbeat_at >= stale_before:
        return job
    current = ToolJob.objects.filter(pk=job.pk, status=ToolJob.Status.RUNNING, attempt=job.attempt)
    if job.attempt < job.max_attempts:
        if current.update(status=ToolJob.Status.QUEUED, attempt=F("attempt") + 1, started_at=None, heartbeat_at=None):
            _queue(job.pk, job.attempt + 1)
    else:
        attempts = "once" if job.attempt == 1 else f"{job.attempt} times"
        current.update(
            status=ToolJob.Status.FAILED,
            error=f"{WORKER_LOST} {job.tool_name} (tried {attempts}), so whether it took effect is not known. "
            "Check before trying it again.",
            outcome=Outcome.UNKNOWN,
            finished_at=timezone.now(),
        )
    job.refresh_from_db()
    return job


def tool_job_cancel(*, job_id, only_queued: bool = False) -> bool:
    """A queued job will not start; a running one's outcome is dropped (the tool itself runs on to its end).

    With `only_queued`, a job that has started is left to finish. Returns whether the job was cancelled.
    """
    statuses = [ToolJob.Status.QUEUED] if only_queued else ToolJob.OPEN
    return bool(
        ToolJob.objects.filter(pk=job_id, status__in=statuses).update(
            status=ToolJob.Status.CANCELLED, finished_at=timezone.now()
        )
    )


# --- attachments ----------------------------------------------------------------------------------

EXTENSIONS = {"pdf": "pdf", "xlsx": "xlsx", "csv": "csv", "json": "json", "png": "png", "jpeg": "jpg"}
NAME_LENGTH = 255


def attachment_name(raw: str | None) -> str:
    """The name a person gave the file, made safe to show and to quote: no folders, no control characters."""
    name = PureWindowsPath(PurePosixPath(raw or "").name).name
    name = "".join(char for char in name if unicodedata.category(char)[0] != "C")
    name = " ".join(name.replace('"', "'").split())
    return name[:NAME_LENGTH] or "file"


def attachment_reject(*, conversation: Conversation, owner, name: str, size: int, error: DocumentError, **data) -> None:
    audit_record(
        kind=AuditEvent.Kind.ATTACHMENT_REJECTED,
        actor=owner,
        conversation=conversation,
        data={"name": name, "size": size, "status": error.status, "code": error.code, "reason": error.message, **data},
    )


def _copy_hashing(upload: UploadedFile, path: str) -> tuple[int, str]:
    digest = hashlib.sha256()
    size = 0
    with open(path, "wb") as copy:
        for chunk in upload.chunks():
            size += len(chunk)
            if size > MAX_UPLOAD_BYTES:
                raise FileTooLarge(f"The file is larger than {MAX_UPLOAD_BYTES // MiB} MB.")
            digest.update(chunk)
            copy.write(chunk)
    return size, digest.hexdigest()


def _without_nul(value: Any) -> Any:
    """PostgreSQL keeps no NUL character in text or jsonb; a file may well hold some."""
    if isinstance(value, str):
        return value.replace("\x00", "")
    if isinstance(value, list):
        return [_without_nul(item) for item in value]
    if isinstance(value, dict):
        return {_without_nul(key): _without_nul(item) for key, item in value.items()}
    return value


def _parse_budget() -> sandbox.Budget:
    return sandbox.Budget(
        seconds=settings.DOCUMENT_PARSE_TIMEOUT,
        memory_bytes=settings.DOCUMENT_PARSE_MEMORY_MB * MiB,
        file_bytes=DEFAULT_LIMITS.content_bytes,
    )


def attachment_upload(*, conversation: Conversation, owner, upload: UploadedFile) -> Attachment:
    """Check, read (in a child process, within the time and memory limits) and store a file; audited either way.

    A file that is rejected (DocumentError: too large, unsupported, unreadable) is not kept.
    """
    # Here, not at the top: the parser libraries are loaded by the server only once someone uploads a file.
    from tools.documents.parsing import parse_file

    name = attachment_name(upload.name)
    size, sha256 = upload.size or 0, ""
    with tempfile.TemporaryDirectory(prefix="agentchat-upload-") as workdir:
        source, content = os.path.join(workdir, "source"), os.path.join(workdir, "content")
        try:
            size, sha256 = _copy_hashing(upload, source)
            parsed = sandbox.run(parse_file, source, content, name, DEFAULT_LIMITS, budget=_parse_budget())
        except DocumentError as error:
            attachment_reject(conversation=conversation, owner=owner, name=name, size=size, error=error, sha256=sha256)
            raise
        attachment = Attachment(
            conversation=conversation,
            owner=owner,
            original_name=name,
            kind=parsed.kind,
            size=size,
            sha256=sha256,
            text=_without_nul(parsed.text),
            meta=_without_nul(parsed.meta),
            index=_without_nul(parsed.index),
            parse_status=Attachment.ParseStatus.PARSED,
        )
        stem = str(attachment.pk)
        with open(source, "rb") as original:
            attachment.file.save(f"{stem}.{EXTENSIONS[parsed.kind]}", File(original), save=False)
        if os.path.getsize(content):
            media_type = parsed.index.get("media_type")
            suffix = {"image/png": "-vision.png", "image/jpeg": "-vision.jpg"}.get(media_type, ".jsonl")
            with open(content, "rb") as normalized:
                attachment.content.save(f"{stem}{suffix}", File(normalized), save=False)
    with transaction.atomic():
        attachment.save()
        audit_record(
            kind=AuditEvent.Kind.ATTACHMENT_UPLOADED,
            actor=owner,
            conversation=conversation,
            data={
                "attachment_id": str(attachment.pk),
                "name": name,
                "kind": attachment.kind,
                "size": size,
                "sha256": sha256,
            },
        )
    return attachment
