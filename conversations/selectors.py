"""Reads, always scoped to the user who asks."""

from __future__ import annotations

import base64
import functools
import uuid
from collections.abc import Callable, Iterable
from datetime import datetime
from importlib import import_module
from typing import NamedTuple, TypedDict

from django.conf import settings
from django.contrib.auth import BACKEND_SESSION_KEY, HASH_SESSION_KEY, SESSION_KEY, get_user_model
from django.contrib.auth.base_user import AbstractBaseUser
from django.contrib.auth.models import Permission
from django.contrib.sessions.backends.base import SessionBase
from django.contrib.sessions.backends.db import SessionStore as DatabaseSessions
from django.contrib.sessions.models import Session
from django.db import connection
from django.db.models import (
    BigIntegerField,
    Count,
    Exists,
    IntegerField,
    OuterRef,
    Q,
    QuerySet,
    Subquery,
    Sum,
    Value,
    prefetch_related_objects,
)
from django.db.models.fields.json import KeyTextTransform
from django.db.models.functions import Cast, Coalesce
from django.utils import timezone
from django.utils.crypto import constant_time_compare
from django.utils.module_loading import import_string

from agentchat.agent.providers import ChatMessage, ImagePart
from tools.documents.context import catalogue, with_files, with_references
from tools.files import StoredFile
from tools.registry import Tool, ToolContext

from .decisions import decision_of, decisions_for
from .models import Attachment, Conversation, Message, PendingConfirmation, TokenUsage, ToolJob
from .search import conversations_search
from .sql import MARKER, Reads, param, prepared, rows, statement

IMAGE_KINDS = {Attachment.Kind.PNG, Attachment.Kind.JPEG}


class ActiveRun(TypedDict):
    active: bool
    run_id: uuid.UUID | None
    since: datetime | None


class SocketAccess(NamedTuple):
    """What the user of an open socket may do now. `user` is None when nothing, and `refusal` says why:
    "gone" (no such user any more), "inactive", or "signed_out" (the socket's session no longer signs them in)."""

    user: AbstractBaseUser | None
    refusal: str
    permissions: frozenset[str]


# What an answer whose server stopped while it was written says happened.
SERVER_STOPPED = "The server stopped while this answer was being written."


def socket_access(user_id, session_key: str | None) -> SocketAccess:
    """The user as the database has them now, a fresh object whose permissions were never cached.

    A socket signed in by a session keeps its user only while that session would still sign them in over
    HTTP (the checks of django.contrib.auth.get_user): signing out or a new password ends it.
    """
    reads = Reads()
    access = access_read(reads, user_id, session_key)
    reads.send()
    return access()


def access_read(reads: Reads, user_id, session_key: str | None) -> Callable[[], SocketAccess]:
    """socket_access, with the user, their permissions and the session read among `reads`: what it gives once they
    are sent."""
    users = reads.add(get_user_model(), *USER(user_id))
    granted = stored = None
    if _model_backend_only(tuple(settings.AUTHENTICATION_BACKENDS)):
        granted = reads.add(None, *USER_PERMISSIONS(user_id))
    if session_key is not None and _sessions() is DatabaseSessions:
        stored = reads.add(None, _session_statement(), [session_key, param(Session, "expire_date", timezone.now())])
    return lambda: _access(next(iter(users()), None), session_key, stored, granted)


def _access(
    user, session_key: str | None, stored: Callable[[], list] | None, granted: Callable[[], list] | None
) -> SocketAccess:
    if user is None:
        return SocketAccess(None, "gone", frozenset())
    if not user.is_active:
        return SocketAccess(None, "inactive", frozenset())
    if session_key is not None and not _session_signs_in(_session(session_key, stored), user):
        return SocketAccess(None, "signed_out", frozenset())
    return SocketAccess(user, "", _all_permissions(user, granted))


def _all_permissions(user, granted: Callable[[], list] | None) -> frozenset[str]:
    """`user.get_all_permissions()`, read in one statement compiled once (`granted`, the user's own and their
    groups') when Django's ModelBackend is the only backend that grants any: building its two queries took a
    third of a run's start (docs/benchmarks.md)."""
    if granted is None:
        return frozenset(user.get_all_permissions())
    if user.is_superuser:
        with connection.cursor() as cursor:
            cursor.execute(*SUPERUSER_PERMISSIONS(user.pk))
            found = cursor.fetchall()
    else:
        found = granted()
    permissions = {f"{app_label}.{codename}" for app_label, codename in found}
    user._perm_cache = permissions  # where ModelBackend keeps them, so that has_perm asks nothing more
    return frozenset(permissions)


@functools.cache
def _model_backend_only(backends: tuple[str, ...]) -> bool:
    granting = [path for path in backends if hasattr(import_string(path), "get_all_permissions")]
    return granting == ["django.contrib.auth.backends.ModelBackend"]


def _permissions(superuser: bool) -> QuerySet:
    """What ModelBackend reads of a user's permissions (all of them for a superuser), in one query."""
    permissions = Permission.objects.all()
    if not superuser:
        fields = get_user_model()._meta
        own = fields.get_field("user_permissions").related_query_name()
        through_groups = f"group__{fields.get_field('groups').related_query_name()}"
        permissions = permissions.filter(Q(**{own: MARKER}) | Q(**{through_groups: MARKER}))
    return permissions.values_list("content_type__app_label", "codename").order_by().distinct()


USER = prepared(lambda: get_user_model()._default_manager.filter(pk=MARKER))
USER_PERMISSIONS = prepared(functools.partial(_permissions, False))
SUPERUSER_PERMISSIONS = prepared(functools.partial(_permissions, True))


def _sessions() -> type[SessionBase]:
    return import_module(settings.SESSION_ENGINE).SessionStore


@functools.cache
def _session_statement() -> str:
    """What the database's session store loads of a session that has not expired (SessionStore.load)."""
    quote, meta = connection.ops.quote_name, Session._meta
    data, key, expires = (quote(meta.get_field(name).column) for name in ("session_data", "session_key", "expire_date"))
    return f"SELECT {data} FROM {quote(meta.db_table)} WHERE {key} = %s AND {expires} > %s"  # noqa: S608 - names


def _session(session_key: str, stored: Callable[[], list] | None) -> dict:
    """The session's data; nothing for a session that was deleted, has expired or does not decode. `stored`: the
    database's session row, read with the user."""
    if stored is None:
        return _sessions()(session_key).load()
    found = stored()
    return DatabaseSessions().decode(found[0][0]) if found else {}


def _session_signs_in(session: dict, user: AbstractBaseUser) -> bool:
    session_hash = session.get(HASH_SESSION_KEY)
    return (
        session.get(SESSION_KEY) == user._meta.pk.value_to_string(user)
        and session.get(BACKEND_SESSION_KEY) in settings.AUTHENTICATION_BACKENDS
        and bool(session_hash)
        and any(
            constant_time_compare(session_hash, known)
            for known in (user.get_session_auth_hash(), *user.get_session_auth_fallback_hash())
        )
    )


def user_ids_with(relation: str, related_ids: Iterable) -> set:
    """The ids of the users whose `relation` ("groups", "user_permissions", "groups__permissions") holds any
    of `related_ids`."""
    users = get_user_model()._default_manager.filter(**{f"{relation}__in": list(related_ids)})
    return set(users.values_list("pk", flat=True).distinct())


def conversations_for(
    user, *, archived: bool | None = False, search: str = "", drafts: bool = False
) -> QuerySet[Conversation]:
    """The user's conversations, newest first; `archived=None` gives both kinds. With `search`, those whose title
    or messages have it (conversations.search). The start page's drafts only with `drafts`: they take files, and
    are not shown until their first message."""
    if search:
        queryset = conversations_search(user, query=search, archived=archived)
    else:
        queryset = Conversation.objects.filter(owner=user)
        if archived is not None:
            queryset = queryset.filter(is_archived=archived)
    if not drafts:
        queryset = queryset.filter(is_draft=False)
    tokens = {
        count: _of_messages(Sum(Cast(KeyTextTransform(count, "usage"), BigIntegerField())))
        for count in ("prompt_tokens", "completion_tokens")
    }
    # The person's questions on the live branch: answers and tool results are not counted.
    questions = _of_messages(Count("pk"), role=Message.Role.USER, superseded=False)
    return queryset.annotate(message_count=questions, **tokens).order_by("-updated_at", "-created_at")


def _of_messages(aggregate, **where) -> Coalesce:
    """An aggregate of each conversation's messages, as a subquery: worked out for the page of conversations
    shown, where a join would read every message of every conversation listed."""
    messages = Message.objects.filter(conversation=OuterRef("pk"), **where).order_by().values("conversation")
    return Coalesce(Subquery(messages.annotate(value=aggregate).values("value")), 0)


class TurnStart(NamedTuple):
    seen: Message | None  # the message stored before under the turn's client_id
    has_files: bool  # whether the user has files in the conversation


def refreshed(conversation: Conversation, fresh: Conversation) -> None:
    """`conversation` (the object a socket holds) given the fields of `fresh`, the same row read again."""
    for field in Conversation._meta.concrete_fields:
        setattr(conversation, field.attname, getattr(fresh, field.attname))


def turn_start(conversation: Conversation, user, client_id: str | None) -> TurnStart:
    """The conversation read again (in place), with what taking a turn needs first, in one query: the message a
    client_id was stored with before, and whether there are files to list."""
    seen = Message.objects.filter(conversation=OuterRef("pk"), client_id=client_id).values("pk")[:1]
    fresh = Conversation.objects.annotate(
        seen=Subquery(seen) if client_id else Value(None, output_field=IntegerField()),
        has_files=Exists(Attachment.objects.filter(conversation=OuterRef("pk"), owner=user)),
    ).get(pk=conversation.pk)
    refreshed(conversation, fresh)
    found = conversation.messages.prefetch_related("attachments").get(pk=fresh.seen) if fresh.seen else None
    return TurnStart(found, fresh.has_files)


def message_with_client_id(conversation: Conversation, client_id: str | None) -> Message | None:
    return conversation.messages.filter(client_id=client_id).first() if client_id else None


def attachments_owned(conversation: Conversation, user, ids) -> list[Attachment]:
    return list(conversation.attachments.filter(owner=user, pk__in=ids))


def history_for(conversation: Conversation, *, include_superseded: bool = True) -> QuerySet[Message]:
    """The conversation's messages, oldest first, with their attachment ids at hand; without superseded ones,
    the live branch only."""
    messages = conversation.messages if include_superseded else conversation.messages.filter(superseded=False)
    return messages.prefetch_related("attachments").order_by("created_at", "id")


def live_messages(conversation: Conversation) -> QuerySet[Message]:
    """The messages that are not superseded, oldest first: the conversation as the model sees it."""
    return conversation.messages.filter(superseded=False).order_by("created_at", "id")


def last_question(conversation: Conversation) -> Message | None:
    return live_messages(conversation).filter(role=Message.Role.USER).last()


def as_shown(conversation: Conversation, messages: list[Message]) -> list[Message]:
    """The messages as a reader sees them: an answer still marked streaming whose run is no longer live (its
    process died) reads as interrupted, which the run that takes the gate over will store. Nothing is written."""
    live = conversation_active_run(conversation)["run_id"]
    for message in messages:
        if message.status == Message.Status.STREAMING and message.metadata.get("run_id") != str(live):
            message.status, message.error = Message.Status.INTERRUPTED, SERVER_STOPPED
    return messages


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
    return Conversation.objects.filter(owner=user, pk=conversation_id, is_draft=False).first()


def draft_for(user, conversation_id) -> Conversation | None:
    return Conversation.objects.filter(owner=user, pk=conversation_id, is_draft=True).first()


def pending_confirmations(conversation: Conversation) -> QuerySet[PendingConfirmation]:
    return conversation.confirmations.filter(
        status=PendingConfirmation.Status.PENDING, expires_at__gt=timezone.now()
    ).order_by("created_at")


def confirmation_in(conversation: Conversation, user, confirmation_id) -> PendingConfirmation | None:
    return (
        PendingConfirmation.objects.select_related("conversation")
        .filter(pk=confirmation_id, conversation__owner=user, conversation=conversation)
        .first()
    )


def confirmation_is_open(confirmation: PendingConfirmation) -> bool:
    """Whether it can still be decided: pending, not expired, its conversation not archived (read afresh)."""
    confirmation.refresh_from_db()
    return (
        confirmation.status == PendingConfirmation.Status.PENDING
        and confirmation.expires_at > timezone.now()
        and not Conversation.objects.filter(pk=confirmation.conversation_id, is_archived=True).exists()
    )


def has_unsettled_decisions(conversation: Conversation) -> bool:
    return confirmations_unsettled(conversation).exists()


# A decided call whose result is not stored yet.
UNSETTLED = Q(status__in=PendingConfirmation.DECIDED, result__isnull=True)


def confirmations_unsettled(conversation: Conversation) -> QuerySet[PendingConfirmation]:
    """Decided calls whose result is not stored yet: to carry out, or to tell how they ended."""
    return conversation.confirmations.filter(UNSETTLED).select_related("decided_by").order_by("created_at")


def confirmations_open(conversation: Conversation) -> QuerySet[PendingConfirmation]:
    """Pending confirmations and decided calls without a result, in one read: what a new message settles."""
    return conversation.confirmations.filter(Q(status=PendingConfirmation.Status.PENDING) | UNSETTLED).order_by(
        "created_at"
    )


def attachments_for(conversation_id, user) -> QuerySet[Attachment]:
    """The user's files in this conversation, newest first."""
    return Attachment.objects.filter(conversation_id=conversation_id, owner=user, conversation__owner=user).order_by(
        "-created_at", "-pk"
    )


def attachment_for(user, conversation_id, ref: str) -> Attachment | None:
    """One of the user's files in that conversation, by id or, failing that, by its file name (newest first)."""
    # Without its text (up to a million characters): the tools read the content file instead.
    files = attachments_for(conversation_id, user).defer("text")
    ref = ref.strip()
    try:
        found = files.filter(pk=uuid.UUID(ref)).first()
    except ValueError:
        found = None
    return found or files.filter(original_name__iexact=ref).order_by("-created_at").first()


def stored_file(attachment: Attachment, *, with_text: bool = False) -> StoredFile:
    content = attachment.content
    return StoredFile(
        id=str(attachment.pk),
        name=attachment.original_name,
        kind=attachment.kind,
        size=attachment.size,
        meta=attachment.meta,
        index=attachment.index,
        open=(lambda: content.open("rb")) if content else None,
        text=attachment.text if with_text else "",
    )


class ConversationFiles:
    """A conversation's files as its tools reach them: only the user's own, looked up when a tool asks."""

    def __init__(self, conversation_id, user):
        self.conversation_id, self.user = conversation_id, user

    def find(self, ref: str) -> StoredFile | None:
        found = attachment_for(self.user, self.conversation_id, ref)
        return stored_file(found) if found else None

    def listed(self, limit: int) -> list[StoredFile]:
        return [stored_file(found) for found in attachments_for(self.conversation_id, self.user).defer("text")[:limit]]


def files_listed(conversation: Conversation, user) -> list[dict[str, str]]:
    """The conversation's files as the system prompt lists them (and tools are told): {id, name, description}."""
    listed = attachments_for(conversation.pk, user).defer("text")
    return catalogue([stored_file(attachment) for attachment in listed])


def _image_part(attachment: Attachment) -> ImagePart | None:
    """The copy made for vision models at upload, base64-encoded; None when it is missing."""
    if not attachment.content or "media_type" not in attachment.index:
        return None
    try:
        with attachment.content.open("rb") as copy:
            data = copy.read()
    except OSError:
        return None
    return {"media_type": attachment.index["media_type"], "data": base64.b64encode(data).decode()}


def _with_files(message: Message, *, newest: bool, file_tokens: int, vision: bool) -> ChatMessage:
    """A user message as the model sees it: the newest with its files' text (and images), older ones naming them."""
    attachments = list(message.attachments.all())
    files = [stored_file(attachment, with_text=True) for attachment in attachments]
    if not newest:
        return {"role": "user", "content": with_references(message.content, files)}
    entry: ChatMessage = {"role": "user", "content": with_files(message.content, files, file_tokens)}
    if vision:
        images = [part for a in attachments if a.kind in IMAGE_KINDS and (part := _image_part(a)) is not None]
        if images:
            entry["images"] = images
    return entry


# live_messages without a streaming answer, read on every round of every run (conversations.sql): only the columns
# the model sees, as converting the others (the conversation's id, times, metadata) cost more than reading the rows.
HISTORY = """
SELECT {Message.id}, {Message.role}, {Message.content}, {Message.tool_calls}, {Message.tool_call_id},
  {Message.tool_name}, {Message.outcome}
FROM {Message}
WHERE {Message.conversation} = %s AND {Message.superseded} = %s AND {Message.status} <> %s
ORDER BY {Message.created_at}, {Message.id}
"""


def _history_query(conversation: Conversation) -> tuple:
    return Message, statement(HISTORY), [param(Conversation, "id", conversation.pk), False, Message.Status.STREAMING]


def history_read(reads: Reads, conversation: Conversation) -> Callable[[], list[Message]]:
    """The messages provider_history makes the history of, read among `reads`."""
    return reads.add(*_history_query(conversation))


def provider_history(
    conversation: Conversation,
    *,
    file_tokens: int = 0,
    vision: bool = False,
    has_files: bool = True,
    earlier: list[Message] | None = None,
    asked: str = "",
) -> list[ChatMessage]:
    """The conversation as the engine sees it: finished, live messages only, every tool call followed by its result.

    The newest user message carries its attachments' text within `file_tokens` (and, with `vision`, its
    images); earlier ones only name theirs. `has_files=False`: the caller knows the conversation has none.
    `earlier`: the messages history_read found before `asked`, a new question without files, was stored.
    """
    history: list[ChatMessage] = []
    messages = rows(*_history_query(conversation)) if earlier is None else earlier
    if has_files:
        prefetch_related_objects(messages, "attachments")
    newest_user = (
        len(messages)
        if asked
        else max((i for i, message in enumerate(messages) if message.role == Message.Role.USER), default=-1)
    )
    for position, message in enumerate(messages):
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
                    "outcome": message.outcome or "done",
                }
            )
        elif message.role == Message.Role.USER and has_files and message.attachments.all():
            history.append(_with_files(message, newest=position == newest_user, file_tokens=file_tokens, vision=vision))
        else:
            history.append({"role": message.role, "content": message.content})
    if asked:
        history.append({"role": "user", "content": asked})
    return history


def last_user_context(conversation: Conversation) -> dict:
    """The page context sent with the newest user message: what "it" refers to."""
    message = last_question(conversation)
    return (message.metadata.get("context") or {}) if message else {}


def tool_context(conversation: Conversation, user, page_context: dict | None = None) -> ToolContext:
    """What the conversation's calls run with; the page context is the newest message's unless it is given
    (a round has read it already)."""
    return ToolContext(
        user=user,
        conversation_id=str(conversation.pk),
        page_context=last_user_context(conversation) if page_context is None else page_context,
        files=ConversationFiles(conversation.pk, user),
    )


def tokens_used_today(user_id) -> int:
    """The tokens the user's answers have cost today (in TIME_ZONE)."""
    today = TokenUsage.objects.filter(user_id=user_id, day=timezone.localdate())
    counts = today.values_list("prompt_tokens", "completion_tokens").first()
    return sum(counts) if counts else 0


def user_as_stored(user_id):
    """The user as the database has them now (a fresh object, so no permission is cached); None if not active."""
    return get_user_model().objects.filter(pk=user_id, is_active=True).first()


def user_may_use(user_id, tool: Tool) -> bool:
    """Whether the user, as stored at this moment, is active and permitted `tool`."""
    user = user_as_stored(user_id)
    return user is not None and tool.permitted(user)


def tool_job_for(conversation: Conversation, tool_call_id: str) -> ToolJob | None:
    return conversation.tool_jobs.filter(tool_call_id=tool_call_id).first()


def tools_in_flight(conversation: Conversation) -> list[dict]:
    """The background jobs not finished yet, as the cards of a live run's snapshot show them."""
    running = conversation.tool_jobs.filter(status__in=[ToolJob.Status.QUEUED, ToolJob.Status.RUNNING])
    jobs = list(running.order_by("created_at"))
    decided = decisions_for(conversation.pk) if jobs else {}
    return [
        {
            "tool_call_id": job.tool_call_id,
            "tool": job.tool_name,
            "input": job.args,
            "background": True,
            "decision": decision_of(decided[job.tool_call_id]) if job.tool_call_id in decided else None,
        }
        for job in jobs
    ]


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
        "tools": tools_in_flight(conversation),
    }
