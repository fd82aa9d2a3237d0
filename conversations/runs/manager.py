"""The runs of this process: one per conversation at a time, each its own asyncio task.

The ways in are a message, a decision and a page joining (resume); each takes the conversation's gate, and
the run carries out decided calls first, then rounds with the provider, its events recorded by a Recorder.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import time
from collections.abc import Callable
from typing import Any

from django.conf import settings
from django.utils.formats import number_format
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy, ngettext

from agentchat.agent.calls import Started, ToolAccess, ToolOutcome, call_tool, carry_out
from agentchat.agent.context import fit_history, truncate_message
from agentchat.agent.orchestrator import AgentRun
from agentchat.agent.providers import Provider, ProviderError
from agentchat.sentences import translate
from tools.registry import Tool, ToolArgumentsError, ToolContext, ToolRegistry

from .. import selectors, services
from ..decisions import decision_of
from ..exceptions import AlreadySettled, Busy, CheckpointExpired, Invalid
from ..models import AuditEvent, Conversation, Message, PendingConfirmation
from ..ratelimit import SharedWindow
from . import db
from .coalesce import ReadAhead
from .control import ControlPlane
from .frames import notice
from .jobs import wait_for_job
from .live import LiveRun
from .recorder import Recorder

logger = logging.getLogger(__name__)

# How long a decision waits for the gate that another tab's decision (or the asking run) holds.
DECISION_WAIT = 1.0
EXPIRED = gettext_lazy("This confirmation was already decided, replaced or has expired.")
# What a stopped answer says happened.
STOPPED = "You pressed Stop."
# The answers being streamed are written at most this often: a crash loses no more than that.
FLUSH_INTERVAL = 0.3


class _StoppedAfter(Exception):
    """The run was stopped while a decided call ran; the call was seen through and this is how it ended."""

    def __init__(self, outcome: ToolOutcome):
        super().__init__(outcome.outcome)
        self.outcome = outcome


class RunManager:
    """One instance per process; all shared state is in the database.

    `registry` holds the tools and `provider_factory` makes the model provider: both are passed in, so a test
    gives its own.
    """

    def __init__(self, *, registry: ToolRegistry, provider_factory: Callable[[], Provider]):
        self.registry = registry
        self.provider_factory = provider_factory
        # The event loop keeps only weak references to tasks: this keeps each live run's task alive.
        self.live: dict[str, LiveRun] = {}
        self.flusher: asyncio.Task | None = None
        self.limiter = SharedWindow("messages", settings.WS_MESSAGES_PER_MINUTE, seconds=60)
        self.control = ControlPlane()

    # --- the ways in -----------------------------------------------------------------------------

    async def submit(
        self,
        *,
        conversation: Conversation,
        user,
        turn: services.Turn,
        session_key: str | None = None,
        permissions: frozenset[str] = frozenset(),
    ) -> dict[str, Any] | None:
        """Take a turn (a message, an edit, a regenerate or a continue) and start its run; what changed goes to
        every socket of the conversation.

        The user acts only as the database has them now: with `session_key` (a socket signed in by its session)
        still signing them in and the `permissions` the socket opened with, or AccessRefused. A client_id seen
        before changes nothing: the echo of what it stored is returned instead.
        """
        length = len(turn.content)
        text, truncated = truncate_message(turn.content)
        if turn.asks:
            metadata: dict[str, Any] = {"context": (turn.metadata or {}).get("context") or {}}
            if truncated:
                metadata["original_length"] = length
            turn = turn._replace(content=text, metadata=metadata)
        accepted = await db.take_turn(conversation, (user, session_key, permissions), turn, self.limiter, self.registry)
        if accepted.echo is not None:
            return accepted.echo
        run = LiveRun(
            run_id=str(accepted.run_id),
            conversation=conversation,
            user=accepted.user,
            begun=accepted.begun,
            client_id=None if turn.asks else turn.client_id,
            opening=list(accepted.frames),
        )
        if turn.asks and truncated:
            cut = ngettext(
                "Your message was cut from %(before)s to %(after)s character.",
                "Your message was cut from %(before)s to %(after)s characters.",
                len(text),
            ) % {
                "before": number_format(length, force_grouping=True),
                "after": number_format(len(text), force_grouping=True),
            }
            run.opening.append(notice("MESSAGE_TRUNCATED", cut))
        await self.control.open(run)
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
        confirmation = await db.confirmation(conversation, user, confirmation_id)
        if not await db.is_open(confirmation):
            raise CheckpointExpired(EXPIRED)
        if decision == "edit":
            tool = self.registry.find(confirmation.tool_name)
            if tool is None:
                raise Invalid(_("The tool %(tool)s is no longer available.") % {"tool": confirmation.tool_name})
            try:
                args = tool.normalise(tool.validate(args, say=_))
            except ToolArgumentsError as exc:
                raise Invalid(str(exc)) from None
        deadline = time.monotonic() + DECISION_WAIT
        while (run_id := await db.claim(conversation=conversation)) is None:
            # Someone else holds the gate, most likely a tab deciding this very confirmation.
            if not await db.is_open(confirmation):
                raise CheckpointExpired(EXPIRED)
            if time.monotonic() > deadline:
                raise Busy(_("A run is going on in this conversation. Decide again when it has finished."))
            await asyncio.sleep(0.05)
        if not await db.decide(confirmation=confirmation, decision=decision, actor=user, args=args, reason=reason):
            await db.release(conversation=conversation, run_id=run_id)
            raise CheckpointExpired(EXPIRED)
        await self._start(LiveRun(run_id=str(run_id), conversation=conversation, user=user, after_decision=True))

    async def resume(self, *, conversation: Conversation, user) -> None:
        """Carry out what a run that stopped with its process left decided and without a result, if nothing
        runs now: a socket joining the conversation starts it, so the user sees how their decision ended."""
        if conversation.is_archived or not await db.has_unsettled(conversation):
            return
        if (run_id := await db.claim(conversation=conversation)) is None:
            return
        await self._start(LiveRun(run_id=str(run_id), conversation=conversation, user=user, after_decision=True))

    async def cancel(self, conversation: Conversation) -> None:
        """Stop the conversation's live run: at once when it runs in this process (the gate allows it nowhere
        else then), through the control plane otherwise, or when its task has not begun (its listener, which it
        starts first, then finds the cancel waiting)."""
        here = [run for run in self.live.values() if run.conversation.pk == conversation.pk and run.driving]
        for run in here:
            run.stop()
        if not here:
            await self.control.cancel(conversation)

    async def request_snapshot(self, conversation: Conversation, reply_to: str) -> None:
        await self.control.request_snapshot(conversation, reply_to)

    # --- one run ---------------------------------------------------------------------------------

    async def _start(self, run: LiveRun) -> None:
        await self.control.open(run)
        self._launch(run)

    def _launch(self, run: LiveRun) -> None:
        self.live[run.run_id] = run
        run.task = asyncio.create_task(self._drive(run, Recorder(run)), name=f"run {run.run_id}")
        if self.flusher is None or self.flusher.done():
            self.flusher = asyncio.create_task(self._flush_periodically(), name="flush answers")

    async def _flush_periodically(self) -> None:
        """The text so far of every answer this process streams, at most every FLUSH_INTERVAL, in one write for
        them all: a write each kept the one SQLite thread busy at a few hundred streams (docs/benchmarks.md)."""
        while self.live:
            await asyncio.sleep(FLUSH_INTERVAL)
            due = [run for run in self.live.values() if run.dirty and run.message_id is not None]
            if not due:
                continue
            for run in due:
                run.dirty = False
            try:
                await db.flush(texts={run.message_id: run.content for run in due})
            except db.DATABASE_UNREACHABLE:
                for run in due:
                    run.dirty = True  # written at a later tick, once the database is back

    async def _drive(self, run: LiveRun, recorder: Recorder) -> None:
        conversation = run.conversation
        listener = asyncio.create_task(self.control.listen(run))
        heartbeat = asyncio.create_task(recorder.keep_alive())
        status, error = "failed", ""
        try:
            run.driving = True
            decided, waiting, run.message_id, inputs = run.begun or await db.begin(
                conversation, run.user, run.run_id, run.after_decision, self.registry
            )
            status, error = await self._steps(run, recorder, decided, waiting, inputs)
            run.cancellable = False
        except asyncio.CancelledError:
            status = "cancelled"
            run.cancellable = False
            await self._echo(run, recorder)
            await recorder.stop(
                why=services.CANCELLED_BY_USER, message_status=Message.Status.INTERRUPTED, stopped=True, error=STOPPED
            )
        except Exception:
            logger.exception("run %s failed", run.run_id)
            status, error = "failed", "Something went wrong on our side while answering."
            run.cancellable = False
            await self._echo(run, recorder)
            await recorder.stop(
                why=services.INTERRUPTED, message_status=Message.Status.FAILED, stopped=False, error=error
            )
        finally:
            heartbeat.cancel()
            await asyncio.gather(heartbeat, return_exceptions=True)
            await self.control.stop_listening(run, listener)
            try:
                await db.retrying(db.release, conversation=conversation, run_id=run.run_id)
            except db.DATABASE_UNREACHABLE:
                logger.error("run %s could not release its conversation; its heartbeat will lapse", run.run_id)
            self.live.pop(run.run_id, None)
        # However the run ended, a call it stored a request for stays pending: its card is shown.
        for frame in run.asking:
            await recorder.send(frame)
        if status == "failed":
            await recorder.send({"type": "error", "code": "PROVIDER_ERROR", "message": translate(error)})
        await recorder.send({"type": "run_finished", "status": status, "message_id": run.last_assistant_id})
        try:
            await db.retrying(recorder.audit, AuditEvent.Kind.RUN_FINISHED, {"run_id": run.run_id, "status": status})
        except db.DATABASE_UNREACHABLE:
            logger.error("run %s finished %s; the database was unreachable to audit it", run.run_id, status)

    async def _steps(
        self, run: LiveRun, recorder: Recorder, decided: list[PendingConfirmation], waiting: bool, inputs
    ) -> tuple[str, str]:
        """Carry out decided confirmations, then rounds with the provider. Returns (status, error)."""
        if decided or waiting:
            await self._open(run, recorder)
        for confirmation in decided:
            await self._carry_out(run, recorder, confirmation)
        if waiting:
            await recorder.end_message()
            return "awaiting_confirmation", ""

        history, tools, system_prompt, context = inputs or await db.round_inputs(
            run.conversation, run.user, self.registry
        )
        trimmed = fit_history(history, budget=settings.CONTEXT_TOKEN_BUDGET, system_prompt=system_prompt)
        try:
            provider = self.provider_factory()
        except ProviderError as exc:
            await self._open(run, recorder)
            await recorder.end_message(failed=True, error=exc.message)
            return "failed", exc.message
        ctx = selectors.tool_context(run.conversation, run.user, context)
        agent = AgentRun(
            provider=provider,
            tools=tools,
            withheld=self.registry.withheld(tools),
            access=self._access(run, functools.partial(self._execute, run, recorder, ctx)),
            system_prompt=system_prompt,
            max_rounds=settings.AGENT_MAX_ROUNDS,
            run_id=run.run_id,
        )
        async with ReadAhead(agent.events(trimmed.messages), runs=lambda: len(self.live)) as events:
            # The reading gets as far as asking the provider, which then thinks while the first frames go out.
            await asyncio.sleep(0)
            await self._open(run, recorder)
            if trimmed.dropped:
                detail = ngettext(
                    "%(count)s older message was left out to fit the context budget.",
                    "%(count)s older messages were left out to fit the context budget.",
                    trimmed.dropped,
                ) % {"count": trimmed.dropped}
                await recorder.send(notice("CONTEXT_TRIMMED", detail))
            async for event in events:
                finished = await recorder.handle(event)
                if finished is not None:
                    return finished
        return "failed", "The run ended without an answer."

    async def _echo(self, run: LiveRun, recorder: Recorder) -> None:
        """What the run's turn stored and changed, to every socket of the conversation, once."""
        while run.opening:
            frame = run.opening.pop(0)
            await recorder.send(frame() if callable(frame) else frame)

    async def _open(self, run: LiveRun, recorder: Recorder) -> None:
        """The run's first frames, once: the echo, then run_started."""
        await self._echo(run, recorder)
        if not run.started:
            run.started = True
            started = {"type": "run_started", "message_id": run.message_id}
            await recorder.send({**started, "client_id": run.client_id} if run.client_id else started)

    def _access(self, run: LiveRun, execute) -> ToolAccess:
        """Calls carried out for this run's user as the database has them at each call."""
        return ToolAccess(
            lookup=self.registry.find, permitted=functools.partial(db.user_may_use, run.user.pk), execute=execute
        )

    async def _execute(
        self,
        run: LiveRun,
        recorder: Recorder,
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
            job_id = await db.enqueue_job(run, tool, call_id, tool.normalise(args), confirmation)
            return await wait_for_job(job_id, tool.name, decided=confirmation is not None, send=recorder.send)
        if confirmation is None:
            return await call_tool(tool, args, ctx)

        async def claimed() -> ToolOutcome:
            if not await db.claim_decision(confirmation=confirmation):
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

    async def _carry_out(self, run: LiveRun, recorder: Recorder, confirmation: PendingConfirmation) -> None:
        """A decided call, as a run's first step: rejected, run now (under a claim that outlives a crash), or,
        when a run that died had started it, its background job waited for or its result said to be unknown."""
        call_id, name = confirmation.tool_call_id, confirmation.tool_name
        decision = decision_of(confirmation)
        outcome, job = await db.decision_outcome(confirmation)
        if outcome is None and job is not None:
            await recorder.tool_start(call_id, name, job.args, background=True, decision=decision)
            outcome = await wait_for_job(job.pk, name, decided=True, send=recorder.send)
        elif outcome is None:
            edited = confirmation.status == PendingConfirmation.Status.EDITED
            ctx = await db.tool_context(run.conversation, run.user)
            execute = functools.partial(self._execute, run, recorder, ctx, confirmation=confirmation)
            try:
                async for step in carry_out(
                    self._access(run, execute),
                    call_id,
                    name,
                    confirmation.edited_args if edited else confirmation.args,
                    decided=True,
                ):
                    if isinstance(step, Started):
                        background = step.tool.in_background
                        await recorder.tool_start(call_id, name, step.args, background=background, decision=decision)
                    else:
                        outcome = step
            except _StoppedAfter as stopped:
                await recorder.tool_result(call_id, name, stopped.outcome, confirmation)
                raise asyncio.CancelledError from None
            except AlreadySettled:
                logger.warning("run %s: call %s was carried out by another run", run.run_id, call_id)
                return
        await recorder.tool_result(call_id, name, outcome, confirmation)
