"""Live runs: one per conversation, as its own asyncio task, stored in batches and fanned out to every socket.

Every frame of a run goes to the conversation's group on the channel layer, so every socket of the
conversation, on any process, gets the same frames in the same order. The run itself listens on a
control group of its own: a `cancel` or a newcomer's request for the text so far reaches it from
any process. All state lives in the database; a run's process only holds what it is streaming.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import functools
import logging
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field, replace
from typing import Any

from channels.db import database_sync_to_async
from channels.layers import DEFAULT_CHANNEL_LAYER, channel_layers, get_channel_layer
from django.conf import settings
from django.db import InterfaceError, OperationalError
from django.utils import timezone

from agentchat.agent import events as ev
from agentchat.agent.calls import Outcome, Started, ToolAccess, ToolOutcome, call_tool, carry_out
from agentchat.agent.context import fit_history, truncate_message
from agentchat.agent.orchestrator import AgentRun
from agentchat.agent.prompts import build_system_prompt
from agentchat.agent.providers import ProviderError, get_provider
from tools.registry import Tool, ToolArgumentsError, ToolContext, registry

from . import selectors, services
from .api.serializers import MessageSerializer
from .exceptions import AlreadySettled, Busy, CheckpointExpired, Invalid, NotFound, RateLimited
from .models import AuditEvent, Conversation, Message, PendingConfirmation, ToolJob

logger = logging.getLogger(__name__)

FLUSH_INTERVAL = 0.3
SNAPSHOT_TIMEOUT = 2.0
DECISION_WAIT = 1.0
# How long a run that failed keeps trying to store how it ended while the database is unreachable.
STORE_RETRY_FOR = 10.0
# Seconds between a run's tries to join its control group again after the channel layer failed.
LAYER_RETRY = 0.5
# How often a run waiting for a background job looks at it, and when it says that no worker has taken it.
JOB_POLL_INTERVAL = 0.5
JOB_WAIT_NOTICE = 10.0


def conversation_group(conversation_id) -> str:
    return f"chat.{conversation_id}"


def control_group(conversation_id) -> str:
    return f"chat.{conversation_id}.control"


DATABASE_UNREACHABLE = (OperationalError, InterfaceError)


async def _retrying(step, *args):
    """A write that must land, tried again with a short backoff while the database is unreachable."""
    deadline = time.monotonic() + STORE_RETRY_FOR
    pause = 0.1
    while True:
        try:
            return await step(*args)
        except DATABASE_UNREACHABLE:
            if time.monotonic() + pause > deadline:
                raise
            logger.warning("the database is unreachable; trying again in %.1f s", pause)
            await asyncio.sleep(pause)
            pause = min(pause * 2, 1.0)


def message_frame(message: Message, client_id: str | None = None) -> dict[str, Any]:
    frame: dict[str, Any] = {"type": "message", "message": MessageSerializer(message).data}
    if client_id:
        frame["client_id"] = client_id
    return frame


def confirmation_frame(confirmation: PendingConfirmation) -> dict[str, Any]:
    return {
        "type": "confirm_required",
        "confirmation_id": str(confirmation.pk),
        "tool_call_id": confirmation.tool_call_id,
        "tool": confirmation.tool_name,
        "input": confirmation.args,
        "expires_at": confirmation.expires_at.isoformat(),
    }


@dataclass
class LiveRun:
    run_id: str
    conversation: Conversation
    user: Any
    seq: int = 0
    message_id: int | None = None
    content: str = ""
    dirty: bool = False
    last_assistant_id: int | None = None
    task: asyncio.Task | None = None
    control_channel: str = ""
    # Calls started and not finished yet, as the snapshot for a joining socket shows their cards.
    tools: dict[str, dict[str, Any]] = field(default_factory=dict)
    # False once the run's outcome is decided: a late cancel must not interrupt its clean-up.
    cancellable: bool = True
    after_decision: bool = False
    frames_lost: int = 0

    def stop(self) -> None:
        if self.cancellable and self.task is not None:
            self.task.cancel()

    def next_seq(self) -> int:
        self.seq += 1
        return self.seq

    def snapshot(self) -> dict[str, Any]:
        return {
            "run_id": self.run_id,
            "message_id": self.message_id,
            "status": "streaming",
            "content": self.content,
            "seq": self.seq,
            "tools": list(self.tools.values()),
        }


class MessageLimiter:
    """At most `per_minute` message frames per user on this process (a sliding window)."""

    def __init__(self, per_minute: int):
        self.per_minute = per_minute
        self.sent: dict[int, collections.deque[float]] = collections.defaultdict(collections.deque)

    def allow(self, user_id: int) -> bool:
        now = time.monotonic()
        sent = self.sent[user_id]
        while sent and sent[0] <= now - 60:
            sent.popleft()
        if len(sent) >= self.per_minute:
            return False
        sent.append(now)
        return True


# --- database steps, each one short, in the database thread ----------------------------------------


class _StoppedAfter(Exception):
    """The run was stopped while a decided call ran; the call was seen through and this is how it ended."""

    def __init__(self, outcome: ToolOutcome):
        super().__init__(outcome.outcome)
        self.outcome = outcome


def _take_gate(conversation: Conversation) -> str | None:
    run_id = services.conversation_run_claim(conversation=conversation)
    return None if run_id is None else str(run_id)


_claim = database_sync_to_async(_take_gate)


@database_sync_to_async
def _release(conversation: Conversation, run_id: str) -> None:
    services.conversation_run_release(conversation=conversation, run_id=run_id)


@database_sync_to_async
def _heartbeat(conversation: Conversation, run_id: str) -> bool:
    return services.conversation_run_heartbeat(conversation=conversation, run_id=run_id)


def _store_user_message(
    conversation, user, content, client_id, attachments, context, original_length
) -> tuple[bool, list[dict[str, Any]]]:
    """Store the message (after the decisions it supersedes); returns whether it is new and the frames to send."""
    metadata: dict[str, Any] = {"context": context}
    if original_length:
        metadata["original_length"] = original_length
    lapsed = services.confirmations_supersede(conversation=conversation, actor=user)
    message, created = services.message_append(
        conversation=conversation,
        role=Message.Role.USER,
        content=content,
        client_id=client_id,
        actor=user,
        metadata=metadata,
    )
    if created and attachments:
        message.attachments.set(attachments)
    return created, [*(message_frame(tool_message) for tool_message in lapsed), message_frame(message, client_id)]


def _existing_message(conversation, client_id) -> dict[str, Any] | None:
    """The echo of a message already stored under this client_id, if there is one."""
    if not client_id:
        return None
    message = conversation.messages.filter(client_id=client_id).first()
    return message_frame(message, client_id) if message else None


@database_sync_to_async
def _intake(conversation: Conversation, client_id) -> dict[str, Any] | None:
    """The echo of a message sent before under this client_id; else None, with the conversation read afresh."""
    if echo := _existing_message(conversation, client_id):
        return echo
    conversation.refresh_from_db()
    return None


@database_sync_to_async
def _open_run(conversation, user, content, client_id, attachments, context, original_length):
    """Take the gate and store the message in one trip: (run_id, created, frames).

    run_id is None when another run holds the gate; frames then hold the echo of this very message if another
    tab sent it at the same moment (it is that tab's run).
    """
    run_id = _take_gate(conversation)
    if run_id is None:
        echo = _existing_message(conversation, client_id)
        return None, False, [echo] if echo else []
    try:
        created, frames = _store_user_message(
            conversation, user, content, client_id, attachments, context, original_length
        )
    except BaseException:
        services.conversation_run_release(conversation=conversation, run_id=run_id)
        raise
    if not created:
        services.conversation_run_release(conversation=conversation, run_id=run_id)
    return run_id, created, frames


@database_sync_to_async
def _owned_attachments(conversation, user, ids) -> list:
    found = list(conversation.attachments.filter(owner=user, pk__in=ids))
    if len(found) != len(set(ids)):
        raise NotFound("One of the attachments does not exist in this conversation.")
    return found


# The newest message's attachments may fill this share of CONTEXT_TOKEN_BUDGET; the rest stays with the tools.
FILE_SHARE = 0.5


def _round_inputs(conversation: Conversation, user) -> tuple[list, list, str, dict, list]:
    history = selectors.provider_history(
        conversation, file_tokens=int(settings.CONTEXT_TOKEN_BUDGET * FILE_SHARE), vision=settings.LLM_VISION
    )
    context = selectors.last_user_context(conversation)
    files = selectors.files_listed(conversation, user)
    now = selectors.user_as_stored(user.pk)
    tools = registry.permitted(now) if now is not None else []
    return history, tools, build_system_prompt(context, files), context, files


@database_sync_to_async
def _audit(kind: str, conversation: Conversation, user, data: dict) -> None:
    services.audit_record(kind=kind, actor=user, conversation=conversation, data=data)


_prepare = database_sync_to_async(_round_inputs)


@database_sync_to_async
def _begin(
    conversation: Conversation, user, run_id: str, after_decision: bool
) -> tuple[list[PendingConfirmation], bool, int | None, Any]:
    """A run's first steps in one trip to the database thread, which every run of the process shares.

    Returns the decisions to carry out first, whether one is still awaited, and, when there is nothing to carry
    out, the answer's row (it exists from the start) and the inputs of the first round. After a decision the
    tool's result must come first, so those wait.
    """
    services.audit_record(
        kind=AuditEvent.Kind.RUN_STARTED, actor=user, conversation=conversation, data={"run_id": run_id}
    )
    decided = list(selectors.confirmations_unsettled(conversation))
    waiting = after_decision and selectors.pending_confirmations(conversation).exists()
    if decided or waiting:
        return decided, waiting, None, None
    message_id = services.assistant_message_start(conversation=conversation, run_id=run_id).pk
    return decided, waiting, message_id, _round_inputs(conversation, user)


@database_sync_to_async
def _start_message(conversation: Conversation, run_id: str) -> int:
    return services.assistant_message_start(conversation=conversation, run_id=run_id).pk


@database_sync_to_async
def _flush(message_id: int, content: str) -> None:
    services.assistant_message_flush(message_id=message_id, content=content)


@database_sync_to_async
def _save_message(message_id: int, content: str, status: str, tool_calls: list | None = None) -> dict[str, Any]:
    services.assistant_message_save(message_id=message_id, content=content, status=status, tool_calls=tool_calls)
    return message_frame(Message.objects.get(pk=message_id))


@database_sync_to_async
def _discard_message(message_id: int) -> None:
    services.assistant_message_discard(message_id=message_id)


@database_sync_to_async
def _store_tool_result(conversation, call_id, name, outcome: ToolOutcome, run_id, confirmation) -> dict[str, Any]:
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
def _close_dangling(conversation: Conversation, why: str, run_id: str, *, stopped: bool) -> list[dict[str, Any]]:
    closed = services.dangling_calls_close(conversation=conversation, why=ToolOutcome.cancelled(why), run_id=run_id)
    settled = services.decisions_settle(
        conversation=conversation, why=services.Settle.STOPPED if stopped else services.Settle.FAILED, run_id=run_id
    )
    return [message_frame(message) for message in [*closed, *settled]]


@database_sync_to_async
def _request_confirmation(conversation, message_id, call_id, name, args, user) -> PendingConfirmation:
    return services.confirmation_request(
        conversation=conversation, message_id=message_id, tool_call_id=call_id, tool_name=name, args=args, actor=user
    )


_tool_context = database_sync_to_async(selectors.tool_context)
_has_unsettled = database_sync_to_async(lambda conversation: selectors.confirmations_unsettled(conversation).exists())
_claim_decision = database_sync_to_async(services.confirmation_claim)
_job_for = database_sync_to_async(selectors.tool_job_for)


@database_sync_to_async
def _enqueue_job(run: LiveRun, tool: Tool, call_id: str, args: dict, confirmation) -> str:
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


_check_job = database_sync_to_async(services.tool_job_check)
_cancel_job = database_sync_to_async(services.tool_job_cancel)


def _access(run: LiveRun, execute) -> ToolAccess:
    """Calls carried out for this run's user as the database has them at each call."""
    return ToolAccess(
        lookup=registry.find,
        permitted=database_sync_to_async(functools.partial(selectors.user_may_use, run.user.pk)),
        execute=execute,
    )


@database_sync_to_async
def _confirmation(conversation: Conversation, user, confirmation_id) -> PendingConfirmation:
    confirmation = (
        PendingConfirmation.objects.select_related("conversation")
        .filter(pk=confirmation_id, conversation__owner=user, conversation=conversation)
        .first()
    )
    if confirmation is None:
        raise NotFound("There is no such confirmation in this conversation.")
    return confirmation


@database_sync_to_async
def _decide(confirmation, user, decision, args, reason) -> bool:
    return services.confirmation_decide(
        confirmation=confirmation, decision=decision, actor=user, args=args, reason=reason
    )


@database_sync_to_async
def _is_pending(confirmation: PendingConfirmation) -> bool:
    confirmation.refresh_from_db()
    return (
        confirmation.status == PendingConfirmation.Status.PENDING
        and confirmation.expires_at > timezone.now()
        and not Conversation.objects.filter(pk=confirmation.conversation_id, is_archived=True).exists()
    )


async def _read_ahead(events: AsyncIterator[ev.RunEvent]) -> AsyncIterator[ev.RunEvent]:
    """The run's tokens, read in a task of their own while the last one is being handled.

    The tokens that arrived meanwhile go on as one: a busy process sends fewer, larger frames instead of
    falling behind, and an idle one sends each token as it comes, as before. Any other event holds the
    reading until it has been handled: no tool starts before its start is stored and sent.
    """
    ready: collections.deque[ev.RunEvent] = collections.deque()
    arrived, handled = asyncio.Event(), asyncio.Event()
    ended: list[BaseException | None] = []

    async def read() -> None:
        try:
            async for event in events:
                ready.append(event)
                arrived.set()
                if not isinstance(event, ev.Token):
                    handled.clear()
                    await handled.wait()
        except BaseException as exc:
            ended.append(exc)
            raise
        else:
            ended.append(None)
        finally:
            arrived.set()

    reader = asyncio.create_task(read())
    try:
        while True:
            await arrived.wait()
            arrived.clear()
            while ready:
                event = ready.popleft()
                if isinstance(event, ev.Token):
                    deltas = [event.delta]
                    while ready and isinstance(ready[0], ev.Token):
                        deltas.append(ready.popleft().delta)
                    event = replace(event, delta="".join(deltas))
                yield event
                if not isinstance(event, ev.Token):
                    handled.set()
            if ended:
                if ended[0] is not None and not isinstance(ended[0], asyncio.CancelledError):
                    raise ended[0]
                return
    finally:
        reader.cancel()
        await asyncio.gather(reader, return_exceptions=True)


class RunManager:
    """The runs of this process. One instance per process; all shared state is in the database."""

    def __init__(self) -> None:
        # The event loop keeps only weak references to tasks: this keeps each live run's task alive.
        self.live: dict[str, LiveRun] = {}
        self.limiter = MessageLimiter(settings.WS_MESSAGES_PER_MINUTE)
        self._control_layer = None

    @property
    def layer(self):
        return get_channel_layer()

    @property
    def control_layer(self):
        """A layer object of the runs' own for their control channels.

        Ending a run cancels its pending receive; on the layer object the sockets share, a cancelled
        receive can swallow or hold up a message meant for a socket of this process.
        """
        if self._control_layer is None:
            self._control_layer = channel_layers.make_backend(DEFAULT_CHANNEL_LAYER)
        return self._control_layer

    async def _send(self, run: LiveRun, frame: dict[str, Any]) -> None:
        """Fan a frame out to every socket of the conversation, numbered in the order it is sent.

        A channel layer that fails (Redis restarting) loses the frame, not the run: the sockets lose their
        layer too and close, and the page reconnects and loads from the database what it missed.
        """
        frame = {**frame, "run_id": run.run_id, "seq": run.next_seq()}
        try:
            await self.layer.group_send(conversation_group(run.conversation.pk), {"type": "run.event", "frame": frame})
        except Exception:
            run.frames_lost += 1
            if run.frames_lost == 1:
                logger.warning(
                    "run %s: the channel layer failed; its frames are lost meanwhile", run.run_id, exc_info=True
                )

    # --- the ways in ---------------------------------------------------------------------------

    async def submit_message(
        self,
        *,
        conversation: Conversation,
        user,
        content: str,
        client_id: str | None = None,
        attachment_ids: list | None = None,
        context: dict | None = None,
    ) -> dict[str, Any] | None:
        """Store the user's message and start a run; the echo goes to every socket of the conversation.

        A client_id seen before stores and answers nothing: the earlier message's echo is returned instead.
        """
        if echo := await _intake(conversation, client_id):
            return echo
        if conversation.is_archived:
            raise Invalid("This conversation is archived. Restore it to continue.")
        if not content.strip():
            raise Invalid("The message is empty.")
        if not self.limiter.allow(user.pk):
            raise RateLimited("You are sending messages too fast. Wait a moment and try again.")
        attachments = await _owned_attachments(conversation, user, attachment_ids) if attachment_ids else []
        text, truncated = truncate_message(content)
        run_id, created, frames = await _open_run(
            conversation, user, text, client_id, attachments, context or {}, len(content) if truncated else 0
        )
        if run_id is None and not frames:
            raise Busy("A run is already going on in this conversation. Wait for it to finish or stop it.")
        if not created:
            return frames[-1]
        run = LiveRun(run_id=run_id, conversation=conversation, user=user)
        await self._listen_for(run)
        for frame in frames:
            await self._send(run, frame)
        if truncated:
            await self._send(
                run,
                {
                    "type": "notice",
                    "code": "MESSAGE_TRUNCATED",
                    "detail": f"Your message was cut from {len(content):,} to {len(text):,} characters.",
                },
            )
        self._launch(run)
        return None

    async def decide(
        self,
        *,
        conversation: Conversation,
        user,
        confirmation_id,
        decision: str,
        args: dict | None = None,
        reason: str = "",
    ) -> None:
        confirmation = await _confirmation(conversation, user, confirmation_id)
        if not await _is_pending(confirmation):
            raise CheckpointExpired("This confirmation was already decided, replaced or has expired.")
        if decision == "edit":
            tool = registry.find(confirmation.tool_name)
            if tool is None:
                raise Invalid(f"The tool {confirmation.tool_name} is no longer available.")
            try:
                args = tool.normalise(tool.validate(args))
            except ToolArgumentsError as exc:
                raise Invalid(str(exc)) from None
        deadline = time.monotonic() + DECISION_WAIT
        while (run_id := await _claim(conversation)) is None:
            # Someone else holds the gate, most likely a tab deciding this very confirmation.
            if not await _is_pending(confirmation):
                raise CheckpointExpired("This confirmation was already decided, replaced or has expired.")
            if time.monotonic() > deadline:
                raise Busy("A run is going on in this conversation. Decide again when it has finished.")
            await asyncio.sleep(0.05)
        if not await _decide(confirmation, user, decision, args, reason):
            await _release(conversation, run_id)
            raise CheckpointExpired("This confirmation was already decided, replaced or has expired.")
        run = LiveRun(run_id=run_id, conversation=conversation, user=user, after_decision=True)
        await self._listen_for(run)
        self._launch(run)

    async def resume(self, *, conversation: Conversation, user) -> None:
        """Carry out what a run that stopped with its process left decided and without a result, if nothing
        runs now: a socket joining the conversation starts it, so the user sees how their decision ended."""
        if conversation.is_archived or not await _has_unsettled(conversation):
            return
        if (run_id := await _claim(conversation)) is None:
            return
        run = LiveRun(run_id=run_id, conversation=conversation, user=user, after_decision=True)
        await self._listen_for(run)
        self._launch(run)

    async def cancel(self, conversation: Conversation) -> None:
        await self.control_layer.group_send(control_group(conversation.pk), {"type": "run.cancel"})

    async def request_snapshot(self, conversation: Conversation, reply_to: str) -> None:
        """Ask the live run (on whichever process) for its text so far; the reply goes to `reply_to`."""
        await self.control_layer.group_send(
            control_group(conversation.pk), {"type": "run.snapshot", "reply_to": reply_to}
        )

    # --- one run -------------------------------------------------------------------------------

    async def _listen_for(self, run: LiveRun) -> None:
        """Join the run's control group now, so that a `cancel` sent right after the message reaches it."""
        run.control_channel = await self.control_layer.new_channel()
        await self.control_layer.group_add(control_group(run.conversation.pk), run.control_channel)

    def _launch(self, run: LiveRun) -> None:
        self.live[run.run_id] = run
        run.task = asyncio.create_task(self._drive(run), name=f"run {run.run_id}")

    async def _drive(self, run: LiveRun) -> None:
        conversation, user = run.conversation, run.user
        listener = asyncio.create_task(self._listen(run))
        helpers = [asyncio.create_task(self._keep_alive(run)), asyncio.create_task(self._flush_periodically(run))]
        status, error = "failed", ""
        try:
            decided, waiting, run.message_id, inputs = await _begin(conversation, user, run.run_id, run.after_decision)
            await self._send(run, {"type": "run_started", "message_id": run.message_id})
            status, error = await self._steps(run, decided, waiting, inputs)
            run.cancellable = False
        except asyncio.CancelledError:
            status = "cancelled"
            run.cancellable = False
            await self._stop(
                run, why=services.CANCELLED_BY_USER, message_status=Message.Status.INTERRUPTED, stopped=True
            )
        except Exception:
            logger.exception("run %s failed", run.run_id)
            status, error = "failed", "Something went wrong on our side while answering."
            run.cancellable = False
            await self._stop(run, why=services.INTERRUPTED, message_status=Message.Status.FAILED, stopped=False)
        finally:
            for helper in helpers:
                helper.cancel()
            await asyncio.gather(*helpers, return_exceptions=True)
            await self._stop_listening(run, listener)
            try:
                await _retrying(_release, conversation, run.run_id)
            except DATABASE_UNREACHABLE:
                logger.error("run %s could not release its conversation; its heartbeat will lapse", run.run_id)
            self.live.pop(run.run_id, None)
        if status == "failed":
            await self._send(run, {"type": "error", "code": "PROVIDER_ERROR", "message": error})
        await self._send(run, {"type": "run_finished", "status": status, "message_id": run.last_assistant_id})
        try:
            await _retrying(
                _audit, AuditEvent.Kind.RUN_FINISHED, conversation, user, {"run_id": run.run_id, "status": status}
            )
        except DATABASE_UNREACHABLE:
            logger.error("run %s finished %s; the database was unreachable to audit it", run.run_id, status)

    async def _steps(self, run: LiveRun, decided: list[PendingConfirmation], waiting: bool, inputs) -> tuple[str, str]:
        """Carry out decided confirmations, then rounds with the provider. Returns (status, error)."""
        for confirmation in decided:
            await self._carry_out(run, confirmation)
        if waiting:
            await self._end_message(run)
            return "awaiting_confirmation", ""

        history, tools, system_prompt, context, files = inputs or await _prepare(run.conversation, run.user)
        trimmed = fit_history(history, budget=settings.CONTEXT_TOKEN_BUDGET, system_prompt=system_prompt)
        if trimmed.dropped:
            await self._send(
                run,
                {
                    "type": "notice",
                    "code": "CONTEXT_TRIMMED",
                    "detail": f"{trimmed.dropped} older messages were left out to fit the context budget.",
                },
            )
        try:
            provider = get_provider()
        except ProviderError as exc:
            await self._end_message(run)
            return "failed", exc.message
        ctx = ToolContext(
            user=run.user, conversation_id=str(run.conversation.pk), page_context=context, attachments=files
        )
        agent = AgentRun(
            provider=provider,
            tools=tools,
            access=_access(run, functools.partial(self._execute, run, ctx)),
            system_prompt=system_prompt,
            max_rounds=settings.AGENT_MAX_ROUNDS,
            run_id=run.run_id,
        )
        async with contextlib.aclosing(_read_ahead(agent.events(trimmed.messages))) as events:
            async for event in events:
                finished = await self._handle(run, event)
                if finished is not None:
                    return finished
        return "failed", "The run ended without an answer."

    async def _handle(self, run: LiveRun, event: ev.RunEvent) -> tuple[str, str] | None:
        conversation = run.conversation
        if isinstance(event, ev.Token):
            if run.message_id is None:
                run.message_id = await _start_message(conversation, run.run_id)
            run.content += event.delta
            run.dirty = True
            await self._send(run, {**event.frame(), "message_id": run.message_id})
        elif isinstance(event, ev.RoundRetry):
            run.content, run.dirty = "", True
            await self._send(run, {**event.frame(), "message_id": run.message_id})
        elif isinstance(event, ev.AssistantMessage):
            if run.message_id is None:
                run.message_id = await _start_message(conversation, run.run_id)
            run.dirty = False
            frame = await _save_message(run.message_id, event.content, Message.Status.COMPLETE, event.tool_calls)
            run.last_assistant_id, run.message_id, run.content = run.message_id, None, ""
            await self._send(run, frame)
        elif isinstance(event, ev.ToolStart):
            await self._tool_start(run, event.tool_call_id, event.tool, event.input, background=event.background)
        elif isinstance(event, ev.ToolEnd | ev.ToolError):
            await self._tool_result(run, event.tool_call_id, event.tool, event.result())
        elif isinstance(event, ev.ConfirmRequired):
            confirmation = await _request_confirmation(
                conversation, run.last_assistant_id, event.tool_call_id, event.tool, event.input, run.user
            )
            await self._send(run, confirmation_frame(confirmation))
        elif isinstance(event, ev.RunFinished):
            await self._end_message(run, failed=event.status == "failed")
            return event.status, event.error
        else:
            await self._send(run, event.frame())
        return None

    async def _tool_start(self, run: LiveRun, call_id: str, name: str, args: dict, *, background: bool) -> None:
        await _audit(
            AuditEvent.Kind.TOOL_CALLED,
            run.conversation,
            run.user,
            {"tool": name, "tool_call_id": call_id, "args": args},
        )
        run.tools[call_id] = {"tool_call_id": call_id, "tool": name, "input": args, "background": background}
        await self._send(run, {"type": "tool_start", **run.tools[call_id]})

    async def _execute(
        self,
        run: LiveRun,
        ctx: ToolContext,
        tool: Tool,
        args,
        call_id: str,
        *,
        confirmation: PendingConfirmation | None = None,
    ) -> ToolOutcome:
        """Run a call here, or a slow tool's as a job in the worker, and say how it went.

        A decided call is claimed as it starts. Once started it is seen through to its end even if the run is
        stopped meanwhile, so that what the user approved has its result stored; the stop takes effect after.
        """
        if tool.in_background:
            job_id = await _enqueue_job(run, tool, call_id, tool.normalise(args), confirmation)
            return await self._wait_for_job(run, job_id, tool.name, decided=confirmation is not None)
        if confirmation is None:
            return await call_tool(tool, args, ctx)

        async def claimed() -> ToolOutcome:
            if not await _claim_decision(confirmation=confirmation):
                raise AlreadySettled(f"The call {call_id} was started by another run.")
            return await call_tool(tool, args, ctx)

        call = asyncio.ensure_future(claimed())
        stopped = False
        while not call.done():
            with contextlib.suppress(asyncio.CancelledError):
                await asyncio.shield(call)
                continue
            stopped = True
        if stopped and call.exception() is None:
            raise _StoppedAfter(call.result())
        return call.result()

    async def _wait_for_job(self, run: LiveRun, job_id, tool_name: str, *, decided: bool) -> ToolOutcome:
        """Wait for a background job's row to say how it went.

        Stopped meanwhile, the job will not start if it has not; one that started goes on, and for a decided
        call its result is waited for by the next run, for the user approved it and it may be taking effect.
        """
        waited, told, attempt = 0.0, False, 1
        try:
            while True:
                job = await _check_job(job_id=job_id)
                if job.status in ToolJob.FINISHED:
                    return services.job_outcome(job)
                if job.attempt > attempt:
                    attempt = job.attempt
                    await self._send(
                        run,
                        {
                            "type": "notice",
                            "code": "JOB_RETRIED",
                            "detail": f"The background worker running {tool_name} stopped; it runs again "
                            f"(attempt {attempt} of {job.max_attempts}).",
                        },
                    )
                if job.status == ToolJob.Status.QUEUED and waited >= JOB_WAIT_NOTICE and not told:
                    told = True
                    await self._send(
                        run,
                        {
                            "type": "notice",
                            "code": "JOB_WAITING",
                            "detail": f"{tool_name} is waiting for a background worker to take it.",
                        },
                    )
                await asyncio.sleep(JOB_POLL_INTERVAL)
                waited += JOB_POLL_INTERVAL
        except BaseException:
            with contextlib.suppress(*DATABASE_UNREACHABLE):
                await asyncio.shield(_cancel_job(job_id=job_id, only_queued=decided))
            raise

    async def _tool_result(
        self,
        run: LiveRun,
        call_id: str,
        name: str,
        outcome: ToolOutcome,
        confirmation: PendingConfirmation | None = None,
    ) -> None:
        run.tools.pop(call_id, None)
        frame = await _store_tool_result(run.conversation, call_id, name, outcome, run.run_id, confirmation)
        kind = {
            Outcome.DONE: AuditEvent.Kind.TOOL_SUCCEEDED,
            Outcome.DENIED: AuditEvent.Kind.PERMISSION_DENIED,
        }.get(outcome.outcome, AuditEvent.Kind.TOOL_FAILED)
        await _audit(
            kind, run.conversation, run.user, {"tool": name, "tool_call_id": call_id, "outcome": outcome.outcome}
        )
        await self._send(
            run, ev.result_event(outcome, run_id=run.run_id, seq=0, tool_call_id=call_id, tool=name).frame()
        )
        await self._send(run, frame)

    async def _carry_out(self, run: LiveRun, confirmation: PendingConfirmation) -> None:
        """A decided call, as a run's first step: rejected, run now (under a claim that outlives a crash), or,
        when a run that died had started it, its background job waited for or its result said to be unknown."""
        call_id, name = confirmation.tool_call_id, confirmation.tool_name
        job = await _job_for(run.conversation, call_id) if confirmation.claimed_at else None
        outcome = services.decision_outcome(confirmation, job)
        if outcome is None and job is not None:
            await self._tool_start(run, call_id, name, job.args, background=True)
            outcome = await self._wait_for_job(run, job.pk, name, decided=True)
        elif outcome is None:
            edited = confirmation.status == PendingConfirmation.Status.EDITED
            ctx = await _tool_context(run.conversation, run.user)
            access = _access(run, functools.partial(self._execute, run, ctx, confirmation=confirmation))
            try:
                async for step in carry_out(
                    access, call_id, name, confirmation.edited_args if edited else confirmation.args, decided=True
                ):
                    if isinstance(step, Started):
                        await self._tool_start(run, call_id, name, step.args, background=step.tool.in_background)
                    else:
                        outcome = step
            except _StoppedAfter as stopped:
                await self._tool_result(run, call_id, name, stopped.outcome, confirmation)
                raise asyncio.CancelledError from None
            except AlreadySettled:
                logger.warning("run %s: call %s was carried out by another run", run.run_id, call_id)
                return
        await self._tool_result(run, call_id, name, outcome, confirmation)

    async def _end_message(self, run: LiveRun, *, failed: bool = False) -> None:
        """The round in progress ends without a complete answer: keep its text, drop an empty placeholder."""
        if run.message_id is None:
            return
        run.dirty = False
        if run.content:
            status = Message.Status.FAILED if failed else Message.Status.INTERRUPTED
            frame = await _save_message(run.message_id, run.content, status)
            run.last_assistant_id = run.message_id
            await self._send(run, frame)
        else:
            await _discard_message(run.message_id)
        run.message_id, run.content, run.dirty = None, "", False

    async def _stop(self, run: LiveRun, *, why: str, message_status: str, stopped: bool) -> None:
        """After a cancel or a crash: partial text kept, every call left without a result told why.

        The crash may be the database going away: its writes are tried again for a while, and should it
        stay away, the next run that takes the gate after this one's heartbeat lapses tidies up instead.
        """
        run.dirty = False
        try:
            if run.message_id is not None and run.content:
                frame = await _retrying(_save_message, run.message_id, run.content, message_status)
                run.last_assistant_id = run.message_id
                await self._send(run, frame)
            elif run.message_id is not None:
                await _retrying(_discard_message, run.message_id)
            run.message_id, run.content, run.dirty = None, "", False
            for frame in await _retrying(
                functools.partial(_close_dangling, stopped=stopped), run.conversation, why, run.run_id
            ):
                await self._send(run, frame)
        except DATABASE_UNREACHABLE:
            logger.error("run %s could not store how it ended: the database stayed unreachable", run.run_id)

    # --- the helpers beside a run ----------------------------------------------------------------

    async def _flush_periodically(self, run: LiveRun) -> None:
        """At most one write per FLUSH_INTERVAL of the text so far: a crash loses no more than that."""
        while True:
            await asyncio.sleep(FLUSH_INTERVAL)
            if run.dirty and run.message_id is not None:
                run.dirty = False
                try:
                    await _flush(run.message_id, run.content)
                except DATABASE_UNREACHABLE:
                    run.dirty = True  # written at a later tick, once the database is back

    async def _keep_alive(self, run: LiveRun) -> None:
        interval = settings.RUN_HEARTBEAT_TIMEOUT.total_seconds() / 3
        while True:
            await asyncio.sleep(interval)
            try:
                ours = await _heartbeat(run.conversation, run.run_id)
            except DATABASE_UNREACHABLE:
                continue  # beats again once the database is back, so a run that outlives the outage keeps its gate
            if not ours:
                logger.warning("run %s lost its conversation's gate; stopping it", run.run_id)
                run.stop()
                return

    async def _listen(self, run: LiveRun) -> None:
        group = control_group(run.conversation.pk)
        try:
            while True:
                try:
                    message = await self.control_layer.receive(run.control_channel)
                    if message["type"] == "run.snapshot":
                        await self.layer.send(message["reply_to"], {"type": "run.snapshot", "run": run.snapshot()})
                except Exception:
                    # A restarted Redis has forgotten the group: join it again, so a cancel still reaches the run.
                    logger.warning("run %s: the channel layer failed; listening again", run.run_id, exc_info=True)
                    await self._join_again(group, run.control_channel)
                    continue
                if message["type"] == "run.cancel":
                    run.stop()
                elif message["type"] == "run.done":
                    return
        finally:
            with contextlib.suppress(Exception):
                await self.control_layer.group_discard(group, run.control_channel)

    async def _join_again(self, group: str, channel: str) -> None:
        while True:
            await asyncio.sleep(LAYER_RETRY)
            with contextlib.suppress(Exception):
                await self.control_layer.group_add(group, channel)
                return

    async def _stop_listening(self, run: LiveRun, listener: asyncio.Task) -> None:
        """End the listener by a message rather than a cancel: on channels_redis a cancelled receive can
        swallow or hold up messages for the other receivers of the same layer object (the other runs)."""
        try:
            await self.control_layer.send(run.control_channel, {"type": "run.done"})
            await asyncio.wait_for(asyncio.shield(listener), timeout=5)
        except Exception:  # the layer is down, or the wait timed out: nothing else would end the listener
            listener.cancel()


runs = RunManager()
