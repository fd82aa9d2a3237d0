"""The run's steps that touch the database: each one short, in Channels' database thread, over services and
selectors. A write that must land is tried again while the database is briefly unreachable (`retrying`)."""

from __future__ import annotations

import asyncio
import functools
import logging
import time
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timedelta
from typing import Any, NamedTuple

from channels.db import DatabaseSyncToAsync
from django.conf import settings
from django.db import InterfaceError, OperationalError
from django.utils import timezone
from django.utils.formats import number_format
from django.utils.translation import gettext as _
from django.utils.translation import ngettext

from agentchat.agent.calls import ToolOutcome
from agentchat.agent.prompts import build_system_prompt
from tools.documents.context import files_prompt
from tools.registry import Tool, ToolRegistry

from .. import selectors, services
from ..exceptions import AccessRefused, Busy, Invalid, NotFound, RateLimited
from ..models import Conversation, PendingConfirmation
from ..ratelimit import SharedWindow
from ..sql import Reads
from . import loop_trip
from .frames import message_frame

logger = logging.getLogger(__name__)

# The threads that every socket's and run's database work of this process runs on (DATABASE_THREADS): one on
# SQLite, where a trip is Python work and writes go one at a time anyway; several on PostgreSQL, where a trip
# mostly waits for the server, and a run's start must not wait behind other runs' trips.
THREADS = ThreadPoolExecutor(max_workers=settings.DATABASE_THREADS, thread_name_prefix="database")
# Where DATABASE_TRIP_ON_LOOP is on, a new message's trip is taken by the event loop itself instead: it is a few
# milliseconds of work, and handed to a database thread it waited for the interpreter and a core behind the event
# loop, and for a thread behind other runs' trips (docs/benchmarks.md).
LOOP = loop_trip.loop_connection(THREADS)


def database_sync_to_async(func):
    """Channels' database_sync_to_async (stale connections closed around each call), on THREADS."""
    return DatabaseSyncToAsync(func, thread_sensitive=False, executor=THREADS)


DATABASE_UNREACHABLE = (OperationalError, InterfaceError)
# How long a run that failed keeps trying to store how it ended while the database is unreachable.
STORE_RETRY_FOR = 10.0
# The newest message's attachments may fill this share of CONTEXT_TOKEN_BUDGET; the rest stays with the tools.
FILE_SHARE = 0.5


async def retrying(step, *args, **kwargs):
    """A write that must land, tried again with a short backoff while the database is unreachable."""
    deadline = time.monotonic() + STORE_RETRY_FOR
    pause = 0.1
    while True:
        try:
            return await step(*args, **kwargs)
        except DATABASE_UNREACHABLE:
            if time.monotonic() + pause > deadline:
                raise
            logger.warning("the database is unreachable; trying again in %.1f s", pause)
            await asyncio.sleep(pause)
            pause = min(pause * 2, 1.0)


# --- the gate --------------------------------------------------------------------------------------

claim = database_sync_to_async(services.conversation_run_claim)
release = database_sync_to_async(services.conversation_run_release)
heartbeat = database_sync_to_async(services.conversation_run_heartbeat)


# --- a message comes in ----------------------------------------------------------------------------


class Accepted(NamedTuple):
    """A turn taken in: either the echo of the message or answer stored before under its client_id, or the new
    run with the frames to send first (settled calls' results, superseded messages, then the new message) and
    its first steps (`begin`)."""

    echo: dict[str, Any] | None = None
    user: Any = None
    run_id: uuid.UUID | None = None
    frames: tuple[dict[str, Any] | Callable[[], dict[str, Any]], ...] = ()
    begun: Begun | None = None


@database_sync_to_async
def accept_turn(
    conversation: Conversation,
    access: tuple[Any, str | None, frozenset[str]],
    turn: services.Turn,
    admission: Admission,
    registry: ToolRegistry,
) -> Accepted:
    """Everything a turn needs before the provider is asked, in one trip to the database thread, which every
    socket and run of the process shares: the user checked as stored now, the turn's writes made under the gate,
    and the run's first steps. `access` is (user, session key, permissions the socket opened with); the turn's
    `attachments` are ids, checked here."""
    if turn.kind == "message" and not turn.attachments:
        user, taken, earlier = _intake(conversation, access, turn, admission)
        if taken is not None:
            return _taken_in(turn, user, taken, _intake_inputs(conversation, user, turn, registry, taken, earlier))
    else:
        user = _acting(*access)
    admit = functools.partial(admission, user)
    start = selectors.turn_start(conversation, user, turn.client_id)
    if start.seen is not None:
        return Accepted(echo=message_frame(start.seen, turn.client_id))
    if conversation.is_archived:
        raise Invalid(_("This conversation is archived. Restore it to continue."))
    if turn.asks and not turn.content.strip():
        raise Invalid(_("The message is empty."))
    admit()
    if turn.attachments:
        turn = turn._replace(attachments=tuple(_owned_attachments(conversation, user, turn.attachments)))
    opened = services.run_open(conversation=conversation, user=user, turn=turn)
    frames = [message_frame(changed) for changed in opened.changed]
    if opened.message is not None:
        frames.append(message_frame(opened.message, turn.client_id))
    if opened.run_id is None and not frames:
        raise Busy(_("A run is already going on in this conversation. Wait for it to finish or stop it."))
    if not opened.created:
        return Accepted(echo=frames[-1])
    run_id = str(opened.run_id)
    # A question, or an answer asked for again, has just settled every earlier decision: none to carry out first.
    decided, waiting, message_id = services.run_begin(
        conversation=conversation,
        user=user,
        run_id=run_id,
        settled=turn.kind != "continue",
        client_id=None if turn.asks else turn.client_id,
    )
    context = turn.metadata["context"] if turn.kind == "message" else None
    inputs = None
    if not decided:
        inputs = _round_inputs(conversation, user, registry, user_now=user, context=context, has_files=start.has_files)
    begun = Begun(decided, waiting, message_id, inputs)
    return Accepted(user=user, run_id=opened.run_id, frames=tuple(frames), begun=begun)


async def take_turn(
    conversation: Conversation,
    access: tuple[Any, str | None, frozenset[str]],
    turn: services.Turn,
    limiter: SharedWindow,
    registry: ToolRegistry,
) -> Accepted:
    """accept_turn: a new message in the common case on the event loop itself where there is LOOP, anything else
    (or a trip the loop could not take) in a database thread."""
    admission = Admission(limiter)
    if LOOP is not None and turn.kind == "message" and not turn.attachments:
        accepted = _message_here(conversation, access, turn, admission, registry)
        if accepted is not None:
            return accepted
    return await accept_turn(conversation, access, turn, admission, registry)


def _message_here(conversation, access, turn: services.Turn, admission: Admission, registry) -> Accepted | None:
    """A new message taken in on the event loop, or None when it is not the common case or the loop could not take
    it (loop_trip.Unavailable before the message was in: its write rolled back, or, should the answer to its write
    never come, in doubt, as after any lost connection). Once the message is in, a round's inputs the loop could
    not read are left to the run, which reads them in a database thread."""
    taken = inputs = None
    try:
        with LOOP.trip():
            user, taken, earlier = _intake(conversation, access, turn, admission)
            if taken is None:
                return None
            inputs = _intake_inputs(conversation, user, turn, registry, taken, earlier)
    except loop_trip.Unavailable:
        if taken is None:
            return None
    return _taken_in(turn, user, taken, inputs)


def _intake(conversation, access, turn: services.Turn, admission: Admission):
    """services.message_intake, after the user as stored now, their permissions, the conversation's state and its
    history have been read together (one answer of the server on PostgreSQL): (the user, what was taken in or
    None, the history as it was before)."""
    user, session_key, permissions = access
    reads = Reads()
    now = selectors.access_read(reads, user.pk, session_key)
    fresh = services.state_read(reads, conversation, turn, user.pk)
    earlier = selectors.history_read(reads, conversation)
    reads.send()
    user = _allowed(now(), permissions)
    admit = functools.partial(admission, user)
    taken = services.message_intake(conversation=conversation, user=user, turn=turn, admit=admit, fresh=fresh())
    return user, taken, earlier()


def _intake_inputs(conversation, user, turn: services.Turn, registry, taken: services.Intake, earlier):
    context = turn.metadata["context"]
    return _round_inputs(
        conversation,
        user,
        registry,
        user_now=user,
        context=context,
        has_files=taken.has_files,
        earlier=earlier,
        asked=turn.content,
    )


def _taken_in(turn: services.Turn, user, taken: services.Intake, inputs) -> Accepted:
    frames = (functools.partial(message_frame, taken.message, turn.client_id),)
    return Accepted(user=user, run_id=taken.run_id, frames=frames, begun=Begun([], False, taken.answer_id, inputs))


def _acting(user, session_key: str | None, permissions: frozenset[str]):
    """The socket's user as stored now, or AccessRefused: signed in still, active, with the same permissions."""
    return _allowed(selectors.socket_access(user.pk, session_key), permissions)


def _allowed(now: selectors.SocketAccess, permissions: frozenset[str]):
    if now.user is None:
        raise AccessRefused(now.refusal)
    if now.permissions != permissions:
        raise AccessRefused("permissions")
    return now.user


class Admission:
    """A turn's check of the user's daily token budget and rate of messages (RateLimited), made once however many
    ways the turn is tried: on the event loop, then in a database thread, the short way, then the general one. A
    message counts once towards the rate."""

    def __init__(self, limiter: SharedWindow) -> None:
        self.limiter = limiter
        self.admitted = False

    def __call__(self, user) -> None:
        if self.admitted:
            return
        budget = settings.USER_DAILY_TOKEN_BUDGET
        if budget and selectors.tokens_used_today(user.pk) >= budget:
            raise RateLimited(_over_budget(budget))
        if not self.limiter.allow(user.pk):
            raise RateLimited(_("You are sending messages too fast. Wait a moment and try again."))
        self.admitted = True


def _over_budget(budget: int) -> str:
    now = timezone.localtime()
    midnight = timezone.make_aware(datetime.combine(now.date() + timedelta(days=1), datetime.min.time()))
    hours, seconds = divmod(int((midnight - now).total_seconds()), 3600)
    used = ngettext(
        "You have used today's budget of %(budget)s token.",
        "You have used today's budget of %(budget)s tokens.",
        budget,
    ) % {"budget": number_format(budget, force_grouping=True)}
    resets = _("It resets at midnight (%(zone)s), in %(hours)s h %(minutes)s min.") % {
        "zone": settings.TIME_ZONE,
        "hours": hours,
        "minutes": seconds // 60,
    }
    return f"{used} {resets}"


def _owned_attachments(conversation, user, ids) -> list:
    found = selectors.attachments_owned(conversation, user, ids)
    if len(found) != len(set(ids)):
        raise NotFound(_("One of the attachments does not exist in this conversation."))
    return found


# --- a run's steps ---------------------------------------------------------------------------------


def _round_inputs(
    conversation: Conversation,
    user,
    registry: ToolRegistry,
    *,
    user_now=None,
    context: dict | None = None,
    has_files: bool = True,
    earlier: list | None = None,
    asked: str = "",
) -> tuple[list, list, str, dict]:
    """What a round asks the provider with: the history, the tools the user may use now, the system prompt.

    `user_now` is the user as just read from the database, and `context` the newest message's page context, when
    the caller has them; otherwise they are read. `has_files=False`: the caller knows there are no files.
    `earlier` and `asked`: the history read before the question was stored, and the question
    (selectors.provider_history).
    """
    files = selectors.files_listed(conversation, user) if has_files else []
    history = selectors.provider_history(
        conversation,
        file_tokens=int(settings.CONTEXT_TOKEN_BUDGET * FILE_SHARE),
        vision=settings.LLM_VISION,
        has_files=bool(files),
        earlier=earlier,
        asked=asked,
    )
    if context is None:
        context = selectors.last_user_context(conversation)
    now = user_now or selectors.user_as_stored(user.pk)
    tools = registry.permitted(now) if now is not None else []
    prompt = build_system_prompt(context, [files_prompt(files)] if files else [])
    return history, tools, prompt, context


round_inputs = database_sync_to_async(_round_inputs)


class Begun(NamedTuple):
    """A run's first steps: decided calls to carry out first, whether a decision is still awaited, the answer's
    row and the round's inputs (after a decision the tool's result comes first: the last two wait)."""

    decided: list[PendingConfirmation]
    waiting: bool
    message_id: int | None
    inputs: tuple[list, list, str, dict] | None


def _begin(conversation: Conversation, user, run_id: str, after_decision: bool, registry: ToolRegistry) -> Begun:
    decided, waiting, message_id = services.run_begin(
        conversation=conversation, user=user, run_id=run_id, after_decision=after_decision
    )
    if message_id is None:
        return Begun(decided, waiting, None, None)
    return Begun(decided, waiting, message_id, _round_inputs(conversation, user, registry))


begin = database_sync_to_async(_begin)


audit = database_sync_to_async(services.audit_record)


@database_sync_to_async
def start_message(conversation: Conversation, run_id: str) -> int:
    return services.assistant_message_start(conversation=conversation, run_id=run_id).pk


flush = database_sync_to_async(services.assistant_messages_flush)
discard_message = database_sync_to_async(services.assistant_message_discard)


@database_sync_to_async
def save_message(
    message_id: int,
    content: str,
    status: str,
    tool_calls: list | None = None,
    error: str = "",
    *,
    usage: dict | None = None,
    metadata: dict | None = None,
) -> dict[str, Any]:
    saved = services.assistant_message_save(
        message_id=message_id,
        content=content,
        status=status,
        tool_calls=tool_calls,
        error=error,
        usage=usage,
        metadata=metadata,
    )
    return message_frame(saved)


@database_sync_to_async
def store_tool_result(conversation, call_id, name, outcome: ToolOutcome, run_id, confirmation) -> dict[str, Any]:
    message = services.tool_result_store(
        conversation=conversation,
        tool_call_id=call_id,
        tool_name=name,
        outcome=outcome,
        run_id=run_id,
        confirmation=confirmation,
    )
    return message_frame(message)


@database_sync_to_async
def close_dangling(conversation: Conversation, why: str, run_id: str, *, stopped: bool) -> list[dict[str, Any]]:
    """Every call of the conversation left without a result is told why (see services.dangling_calls_close and
    services.decisions_settle)."""
    closed = services.dangling_calls_close(conversation=conversation, why=ToolOutcome.cancelled(why), run_id=run_id)
    settled = services.decisions_settle(
        conversation=conversation, why=services.Settle.STOPPED if stopped else services.Settle.FAILED, run_id=run_id
    )
    return [message_frame(message) for message in [*closed, *settled]]


# --- tool calls ------------------------------------------------------------------------------------

user_may_use = database_sync_to_async(selectors.user_may_use)
tool_context = database_sync_to_async(selectors.tool_context)
request_confirmation = database_sync_to_async(services.confirmation_request)
claim_decision = database_sync_to_async(services.confirmation_claim)
decision_outcome = database_sync_to_async(services.decision_outcome)
check_job = database_sync_to_async(services.tool_job_check)
cancel_job = database_sync_to_async(services.tool_job_cancel)
has_unsettled = database_sync_to_async(selectors.has_unsettled_decisions)


@database_sync_to_async
def enqueue_job(run, tool: Tool, call_id: str, args: dict, confirmation: PendingConfirmation | None) -> str:
    job = services.tool_job_enqueue(
        conversation=run.conversation,
        user=run.user,
        run_id=run.run_id,
        tool=tool,
        tool_call_id=call_id,
        args=args,
        claim=confirmation,
    )
    return str(job.pk)


# --- decisions -------------------------------------------------------------------------------------


@database_sync_to_async
def confirmation(conversation: Conversation, user, confirmation_id) -> PendingConfirmation:
    found = selectors.confirmation_in(conversation, user, confirmation_id)
    if found is None:
        raise NotFound(_("There is no such confirmation in this conversation."))
    return found


is_open = database_sync_to_async(selectors.confirmation_is_open)
decide = database_sync_to_async(services.confirmation_decide)
