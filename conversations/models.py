from __future__ import annotations

import uuid

from django.conf import settings
from django.db import models
from django.db.models import Q
from django.utils.translation import gettext_lazy as _

from agentchat.agent.calls import Outcome

OUTCOMES = [(outcome.value, outcome.value) for outcome in Outcome]


class Conversation(models.Model):
    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="conversations")
    title = models.CharField(_("title"), max_length=200, blank=True)
    is_archived = models.BooleanField(_("archived"), default=False)
    archived_at = models.DateTimeField(null=True, blank=True)
    # Made by the start page to hold the files attached before the first message: listed nowhere until that message
    # begins it, and discarded when nobody does (services.conversations).
    is_draft = models.BooleanField(_("draft"), default=False)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)
    # The one-run-at-a-time gate: set by the process running a run, refreshed by its heartbeat.
    active_run_id = models.UUIDField(null=True, blank=True, editable=False)
    active_run_since = models.DateTimeField(null=True, blank=True, editable=False)
    active_run_heartbeat = models.DateTimeField(null=True, blank=True, editable=False)

    class Meta:
        ordering = ["-updated_at"]
        indexes = [
            models.Index(fields=["owner", "is_archived", "-updated_at"], name="conversation_owner_list"),
            models.Index(fields=["created_at"], condition=Q(is_draft=True), name="conversation_drafts"),
        ]
        verbose_name = _("conversation")
        verbose_name_plural = _("conversations")

    def __str__(self) -> str:
        return self.title or str(self.id)


class Message(models.Model):
    class Role(models.TextChoices):
        USER = "user", _("user")
        ASSISTANT = "assistant", _("assistant")
        TOOL = "tool", _("tool")
        SYSTEM = "system", _("system")

    class Status(models.TextChoices):
        COMPLETE = "complete", _("complete")
        STREAMING = "streaming", _("streaming")
        INTERRUPTED = "interrupted", _("interrupted")
        FAILED = "failed", _("failed")

    conversation = models.ForeignKey(Conversation, on_delete=models.CASCADE, related_name="messages")
    role = models.CharField(max_length=16, choices=Role.choices)
    content = models.TextField(blank=True)
    tool_calls = models.JSONField(default=list, blank=True, help_text="The assistant's calls: [{id, name, args}].")
    tool_call_id = models.CharField(max_length=128, blank=True)
    tool_name = models.CharField(max_length=128, blank=True)
    is_error = models.BooleanField(default=False, help_text="For a tool message: the tool failed.")
    outcome = models.CharField(
        max_length=16,
        choices=OUTCOMES,
        blank=True,
        help_text="For a tool message: how the call ended (done, error, rejected, denied, cancelled, unknown…).",
    )
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.COMPLETE)
    error = models.TextField(
        blank=True, help_text="For an answer that failed or was stopped: what happened, in words a person reads."
    )
    superseded = models.BooleanField(
        default=False,
        help_text="Replaced by a regenerated answer or an edited question: kept, never sent to the model.",
    )
    usage = models.JSONField(
        null=True, blank=True, help_text="For an answer: {prompt_tokens, completion_tokens}, as reported."
    )
    # NULL rather than "" so that messages sent without a client_id never collide in the unique constraint.
    client_id = models.CharField(max_length=64, null=True, blank=True)  # noqa: DJ001
    attachments = models.ManyToManyField("Attachment", blank=True, related_name="messages")
    created_at = models.DateTimeField(auto_now_add=True)
    metadata = models.JSONField(default=dict, blank=True)

    class Meta:
        ordering = ["created_at", "id"]
        constraints = [
            models.UniqueConstraint(fields=["conversation", "client_id"], name="message_client_id_unique"),
        ]
        indexes = [models.Index(fields=["conversation", "created_at"], name="message_history")]

    def __str__(self) -> str:
        return f"{self.role}: {self.content[:60]}"


class PendingConfirmation(models.Model):
    class Status(models.TextChoices):
        PENDING = "pending", _("pending")
        APPROVED = "approved", _("approved")
        EDITED = "edited", _("edited")
        REJECTED = "rejected", _("rejected")
        SUPERSEDED = "superseded", _("superseded")
        EXPIRED = "expired", _("expired")

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    conversation = models.ForeignKey(Conversation, on_delete=models.CASCADE, related_name="confirmations")
    message = models.ForeignKey(
        Message, on_delete=models.CASCADE, null=True, blank=True, help_text="The assistant message that made the call."
    )
    tool_call_id = models.CharField(max_length=128)
    tool_name = models.CharField(max_length=128)
    args = models.JSONField(default=dict)
    args_hash = models.CharField(max_length=64)
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.PENDING)
    decided_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    decided_at = models.DateTimeField(null=True, blank=True)
    edited_args = models.JSONField(null=True, blank=True)
    reason = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    expires_at = models.DateTimeField()
    # Carrying out a decision: claimed by the run that starts the tool (a claim that outlives a crash), then
    # settled by the tool message that says how it ended. Claimed and never settled means it may have run.
    claimed_at = models.DateTimeField(null=True, blank=True, editable=False)
    result = models.OneToOneField(
        Message, on_delete=models.SET_NULL, null=True, blank=True, editable=False, related_name="+"
    )

    DECIDED = (Status.APPROVED, Status.EDITED, Status.REJECTED)

    class Meta:
        ordering = ["-created_at"]
        constraints = [
            models.UniqueConstraint(fields=["conversation", "tool_call_id"], name="confirmation_tool_call_unique"),
        ]
        indexes = [
            models.Index(fields=["conversation"], condition=Q(status="pending"), name="confirmation_pending"),
            models.Index(
                fields=["conversation"],
                condition=Q(status__in=["approved", "edited", "rejected"], result__isnull=True),
                name="confirmation_unsettled",
            ),
        ]
        verbose_name = _("confirmation")
        verbose_name_plural = _("confirmations")

    def __str__(self) -> str:
        return f"{self.tool_name} ({self.status})"


class ToolJob(models.Model):
    """A call of a slow tool, run by the background worker; the run waiting for it reads its outcome here."""

    class Status(models.TextChoices):
        QUEUED = "queued", _("queued")
        RUNNING = "running", _("running")
        SUCCEEDED = "succeeded", _("succeeded")
        FAILED = "failed", _("failed")
        CANCELLED = "cancelled", _("cancelled")

    OPEN = (Status.QUEUED, Status.RUNNING)
    FINISHED = (Status.SUCCEEDED, Status.FAILED, Status.CANCELLED)

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    conversation = models.ForeignKey(Conversation, on_delete=models.CASCADE, related_name="tool_jobs")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    run_id = models.UUIDField()
    tool_call_id = models.CharField(max_length=128)
    tool_name = models.CharField(max_length=128)
    args = models.JSONField(default=dict)
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.QUEUED)
    # Which attempt is the current one: a worker holding an older attempt can no longer write the outcome.
    attempt = models.PositiveSmallIntegerField(default=1)
    max_attempts = models.PositiveSmallIntegerField(default=1)
    output = models.JSONField(null=True, blank=True)
    error = models.TextField(blank=True)
    outcome = models.CharField(max_length=16, choices=OUTCOMES, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    heartbeat_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]
        constraints = [
            models.UniqueConstraint(fields=["conversation", "tool_call_id"], name="tool_job_tool_call_unique"),
        ]
        indexes = [
            models.Index(fields=["conversation"], condition=Q(status__in=["queued", "running"]), name="tool_job_open"),
        ]
        verbose_name = _("background tool job")
        verbose_name_plural = _("background tool jobs")

    def __str__(self) -> str:
        return f"{self.tool_name} ({self.status})"


class Attachment(models.Model):
    class Kind(models.TextChoices):
        PDF = "pdf", "PDF"
        XLSX = "xlsx", "XLSX"
        CSV = "csv", "CSV"
        JSON = "json", "JSON"
        PNG = "png", "PNG"
        JPEG = "jpeg", "JPEG"

    class ParseStatus(models.TextChoices):
        PENDING = "pending", _("pending")
        PARSED = "parsed", _("parsed")
        FAILED = "failed", _("failed")

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    conversation = models.ForeignKey(Conversation, on_delete=models.CASCADE, related_name="attachments")
    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="attachments")
    file = models.FileField(upload_to="attachments/%Y/%m/")
    original_name = models.CharField(max_length=255)
    kind = models.CharField(max_length=8, choices=Kind.choices)
    size = models.PositiveBigIntegerField()
    sha256 = models.CharField(max_length=64)
    text = models.TextField(blank=True, help_text="Extracted text, per page or sheet.")
    meta = models.JSONField(default=dict, blank=True, help_text="Pages, sheets, rows, image size…")
    parse_status = models.CharField(max_length=8, choices=ParseStatus.choices, default=ParseStatus.PENDING)
    parse_error = models.TextField(blank=True)
    content = models.FileField(
        upload_to="attachments/%Y/%m/",
        blank=True,
        help_text="What the document tools read: pages, rows or lines as JSON Lines; for an image, the copy a "
        "vision model is sent.",
    )
    index = models.JSONField(default=dict, blank=True, help_text="Where each page, sheet and row starts in content.")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at"]
        indexes = [models.Index(fields=["conversation", "owner", "-created_at"], name="attachment_conversation")]

    def __str__(self) -> str:
        return self.original_name


class TokenUsage(models.Model):
    """What one user's answers cost on one day (of TIME_ZONE), as their providers reported: the admin's totals,
    and what USER_DAILY_TOKEN_BUDGET is counted against."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    day = models.DateField()
    prompt_tokens = models.PositiveBigIntegerField(default=0)
    completion_tokens = models.PositiveBigIntegerField(default=0)
    answers = models.PositiveIntegerField(default=0, help_text="Answers (rounds) whose usage was reported.")

    class Meta:
        ordering = ["-day", "user"]
        constraints = [models.UniqueConstraint(fields=["user", "day"], name="token_usage_user_day")]
        verbose_name_plural = _("token usage")

    def __str__(self) -> str:
        return f"{self.user} {self.day}: {self.total}"

    @property
    def total(self) -> int:
        return self.prompt_tokens + self.completion_tokens


class AuditEvent(models.Model):
    """Append-only: written by services.audit_record, never changed afterwards."""

    class Kind(models.TextChoices):
        CONVERSATION_CREATED = "conversation_created", _("conversation created")
        CONVERSATION_RENAMED = "conversation_renamed", _("conversation renamed")
        CONVERSATION_ARCHIVED = "conversation_archived", _("conversation archived")
        CONVERSATION_RESTORED = "conversation_restored", _("conversation restored")
        MESSAGE_SENT = "message_sent", _("message sent")
        MESSAGE_EDITED = "message_edited", _("message edited")
        ANSWER_REGENERATED = "answer_regenerated", _("answer regenerated")
        RUN_CONTINUED = "run_continued", _("run continued")
        RUN_STARTED = "run_started", _("run started")
        RUN_FINISHED = "run_finished", _("run finished")
        TOOL_CALLED = "tool_called", _("tool called")
        TOOL_SUCCEEDED = "tool_succeeded", _("tool succeeded")
        TOOL_FAILED = "tool_failed", _("tool failed")
        CONFIRMATION_REQUESTED = "confirmation_requested", _("confirmation requested")
        CONFIRMATION_DECIDED = "confirmation_decided", _("confirmation decided")
        PERMISSION_DENIED = "permission_denied", _("permission denied")
        ATTACHMENT_UPLOADED = "attachment_uploaded", _("attachment uploaded")
        ATTACHMENT_REJECTED = "attachment_rejected", _("attachment rejected")
        AUTH_FAILED = "auth_failed", _("authentication failed")

    created_at = models.DateTimeField(auto_now_add=True, db_index=True)
    actor = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    conversation = models.ForeignKey(
        Conversation, on_delete=models.SET_NULL, null=True, blank=True, related_name="audit_events"
    )
    kind = models.CharField(max_length=32, choices=Kind.choices, db_index=True)
    data = models.JSONField(default=dict, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]

    def __str__(self) -> str:
        return f"{self.created_at:%Y-%m-%d %H:%M:%S} {self.kind}"
