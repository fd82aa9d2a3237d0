"""One run's events become rows and frames: stored, numbered and fanned out to every socket of the
conversation; the gate's heartbeat kept. The answer's text so far is flushed by the RunManager."""

from __future__ import annotations

import asyncio
import functools
import json
import logging
from typing import Any

from channels.layers import get_channel_layer
from django.conf import settings

from agentchat.agent import events as ev
from agentchat.agent.calls import Outcome, ToolOutcome
from agentchat.sentences import translate

from ..decisions import Decision
from ..models import AuditEvent, Message, PendingConfirmation
from . import db
from .frames import confirmation_frame, conversation_group
from .live import LiveRun

logger = logging.getLogger(__name__)

AUDIT_KINDS = {Outcome.DONE: AuditEvent.Kind.TOOL_SUCCEEDED, Outcome.DENIED: AuditEvent.Kind.PERMISSION_DENIED}


class Recorder:
    def __init__(self, run: LiveRun):
        self.run = run

    async def send(self, frame: dict[str, Any]) -> None:
        """Fan a frame out to every socket of the conversation, numbered in the order it is sent.

        A channel layer that fails (Redis restarting) loses the frame, not the run: the sockets lose their
        layer too and close, and the page reconnects and loads from the database what it missed.
        """
        run = self.run
        layer, group = get_channel_layer(), conversation_group(run.conversation.pk)
        try:
            if run.elsewhere is None:
                elsewhere = await layer.listeners_elsewhere(group)
                run.elsewhere = run.elsewhere or elsewhere  # a snapshot asked for meanwhile has set it
            seq = run.next_seq()
            # Written as JSON once here, not once by each socket that sends it on.
            event = {
                "type": "run.event",
                "run_id": run.run_id,
                "seq": seq,
                "text": json.dumps({**frame, "run_id": run.run_id, "seq": seq}),
            }
            if run.elsewhere:
                await layer.group_send(group, event)
            else:
                layer.group_send_here(group, event)
        except Exception:
            run.frames_lost += 1
            if run.frames_lost == 1:
                logger.warning(
                    "run %s: the channel layer failed; its frames are lost meanwhile", run.run_id, exc_info=True
                )

    async def audit(self, kind: str, data: dict[str, Any]) -> None:
        await db.audit(kind=kind, actor=self.run.user, conversation=self.run.conversation, data=data)

    async def handle(self, event: ev.RunEvent) -> tuple[str, str] | None:
        """Store and send one event of the agent; for the run's last one, (status, error)."""
        run = self.run
        if isinstance(event, ev.Token):
            if run.message_id is None:
                run.message_id = await db.start_message(run.conversation, run.run_id)
            run.content += event.delta
            run.dirty = True
            await self.send({**event.frame(), "message_id": run.message_id})
        elif isinstance(event, ev.RoundRetry):
            run.content, run.dirty = "", True
            await self.send({**event.frame(), "detail": translate(event.detail), "message_id": run.message_id})
        elif isinstance(event, ev.AssistantMessage):
            if run.message_id is None:
                run.message_id = await db.start_message(run.conversation, run.run_id)
            run.dirty = False
            status = Message.Status.INTERRUPTED if event.stopped else Message.Status.COMPLETE
            # The one way a round's answer stops the run is the step limit: marked, so that pages can say so.
            metadata = {"run_id": run.run_id, "stop": "step_limit"} if event.stopped else None
            frame = await db.save_message(
                run.message_id,
                event.content,
                status,
                event.tool_calls,
                event.stopped,
                usage=event.usage,
                metadata=metadata,
            )
            run.last_assistant_id, run.message_id, run.content = run.message_id, None, ""
            await self.send(frame)
        elif isinstance(event, ev.ToolStart):
            await self.tool_start(event.tool_call_id, event.tool, event.input, background=event.background)
        elif isinstance(event, ev.ToolEnd | ev.ToolError):
            await self.tool_result(event.tool_call_id, event.tool, event.result())
        elif isinstance(event, ev.ConfirmRequired):
            confirmation = await db.request_confirmation(
                conversation=run.conversation,
                message_id=run.last_assistant_id,
                tool_call_id=event.tool_call_id,
                tool_name=event.tool,
                args=event.input,
                actor=run.user,
            )
            run.asking.append(confirmation_frame(confirmation))
        elif isinstance(event, ev.RunFinished):
            await self.end_message(failed=event.status == "failed", error=event.error)
            return event.status, event.error
        else:
            await self.send(event.frame())
        return None

    async def tool_start(
        self, call_id: str, name: str, args: dict, *, background: bool, decision: Decision | None = None
    ) -> None:
        """`decision`: for a call its owner decided, the record its card shows while it runs."""
        await self.audit(AuditEvent.Kind.TOOL_CALLED, {"tool": name, "tool_call_id": call_id, "args": args})
        self.run.tools[call_id] = {
            "tool_call_id": call_id,
            "tool": name,
            "input": args,
            "background": background,
            "decision": decision,
        }
        await self.send({"type": "tool_start", **self.run.tools[call_id]})

    async def tool_result(
        self, call_id: str, name: str, outcome: ToolOutcome, confirmation: PendingConfirmation | None = None
    ) -> None:
        run = self.run
        run.tools.pop(call_id, None)
        frame = await db.store_tool_result(run.conversation, call_id, name, outcome, run.run_id, confirmation)
        kind = AUDIT_KINDS.get(outcome.outcome, AuditEvent.Kind.TOOL_FAILED)
        await self.audit(kind, {"tool": name, "tool_call_id": call_id, "outcome": outcome.outcome})
        await self.send(ev.result_event(outcome, run_id=run.run_id, seq=0, tool_call_id=call_id, tool=name).frame())
        await self.send(frame)

    async def end_message(self, *, failed: bool = False, error: str = "") -> None:
        """The round in progress ends without a complete answer: its text is kept; a failed one is kept even with
        none, saying what went wrong, so that the conversation shows where it failed; an empty placeholder is
        dropped otherwise."""
        run = self.run
        if run.message_id is None:
            if not failed:
                return
            run.message_id = await db.start_message(run.conversation, run.run_id)
        run.dirty = False
        if run.content or failed:
            status = Message.Status.FAILED if failed else Message.Status.INTERRUPTED
            frame = await db.save_message(run.message_id, run.content, status, error=error)
            run.last_assistant_id = run.message_id
            await self.send(frame)
        else:
            await db.discard_message(message_id=run.message_id)
        run.message_id, run.content, run.dirty = None, "", False

    async def stop(self, *, why: str, message_status: str, stopped: bool, error: str) -> None:
        """After a cancel or a crash: the answer being written kept with its partial text and `error`, what
        happened, so that the conversation shows where it stopped; every call left without a result told why
        (its result shows where the run stopped when no answer was being written).

        The crash may be the database going away: its writes are tried again for a while, and should it
        stay away, the next run that takes the gate after this one's heartbeat lapses tidies up instead.
        """
        run = self.run
        run.dirty = False
        try:
            if run.message_id is not None:
                save = functools.partial(db.save_message, error=error)
                frame = await db.retrying(save, run.message_id, run.content, message_status)
                run.last_assistant_id = run.message_id
                await self.send(frame)
            run.message_id, run.content, run.dirty = None, "", False
            close = functools.partial(db.close_dangling, stopped=stopped)
            for frame in await db.retrying(close, run.conversation, why, run.run_id):
                await self.send(frame)
        except db.DATABASE_UNREACHABLE:
            logger.error("run %s could not store how it ended: the database stayed unreachable", run.run_id)

    async def keep_alive(self) -> None:
        run = self.run
        interval = settings.RUN_HEARTBEAT_TIMEOUT.total_seconds() / 3
        while True:
            await asyncio.sleep(interval)
            try:
                ours = await db.heartbeat(conversation=run.conversation, run_id=run.run_id)
            except db.DATABASE_UNREACHABLE:
                continue  # beats again once the database is back, so a run that outlives the outage keeps its gate
            if not ours:
                logger.warning("run %s lost its conversation's gate; stopping it", run.run_id)
                run.stop()
                return
