"""The control plane: each process listens on one channel in the runs' control group, so a `cancel` or a joining
socket's request for the text so far reaches a live run from any process. The process hands what it hears to its
own runs of that conversation; a run joins and leaves nothing in the channel layer."""

from __future__ import annotations

import asyncio
import contextlib
import logging

from channels.layers import DEFAULT_CHANNEL_LAYER, channel_layers, get_channel_layer

from ..models import Conversation
from .frames import CONTROL_GROUP
from .live import LiveRun

logger = logging.getLogger(__name__)

# Seconds between tries to join the control group again after the channel layer failed.
LAYER_RETRY = 0.5


class ControlPlane:
    def __init__(self) -> None:
        self._layer = None
        self._runs: dict[str, list[LiveRun]] = {}  # this process's live runs, by conversation
        self._joining: asyncio.Task | None = None
        self._hearer: asyncio.Task | None = None  # held: the event loop keeps only a weak reference to a task

    @property
    def layer(self):
        """A layer object of the control plane's own: on the one the sockets share, a receive cancelled as a socket
        closes can swallow or hold up a message meant for another receiver of that object."""
        if self._layer is None:
            self._layer = channel_layers.make_backend(DEFAULT_CHANNEL_LAYER)
        return self._layer

    async def open(self, run: LiveRun) -> None:
        """The run hears what is sent to its conversation's runs from now on: a `cancel` sent right after the
        message reaches it. The process joins the control group with its first run."""
        self._runs.setdefault(str(run.conversation.pk), []).append(run)
        try:
            await self._hearing()
        except BaseException:
            self._forget(run)
            raise

    async def _hearing(self) -> None:
        """Returns once this process's channel is in the control group, confirmed, and heard: joined once, by the
        first run (and again by the next one if that failed)."""
        joining = self._joining
        if joining is None or joining.get_loop() is not asyncio.get_running_loop() or _failed(joining):
            self._joining = joining = asyncio.create_task(self._join())
        await asyncio.shield(joining)

    async def _join(self) -> None:
        channel = await self.layer.new_channel()
        await self.layer.group_add(CONTROL_GROUP, channel)
        await self.layer.joined(CONTROL_GROUP)
        self._hearer = asyncio.create_task(self._hear(channel), name="control plane")

    async def cancel(self, conversation: Conversation) -> None:
        await self.layer.group_send(CONTROL_GROUP, {"type": "run.cancel", "conversation": str(conversation.pk)})

    async def request_snapshot(self, conversation: Conversation, reply_to: str) -> None:
        """Ask the live run (on whichever process) for its text so far; the reply goes to `reply_to`."""
        message = {"type": "run.snapshot", "conversation": str(conversation.pk), "reply_to": reply_to}
        await self.layer.group_send(CONTROL_GROUP, message)

    async def _hear(self, channel: str) -> None:
        while True:
            try:
                message = await self.layer.receive(channel)
            except Exception:
                # The connection to Redis was lost, and the channel with it: listen on a new one in the group, so
                # that a cancel still reaches the runs.
                logger.warning("the runs' control channel failed; listening again", exc_info=True)
                channel = await self._join_again()
                continue
            for run in self._runs.get(message.get("conversation"), ()):
                run.control.put_nowait(message)

    async def _join_again(self) -> str:
        while True:
            await asyncio.sleep(LAYER_RETRY)
            with contextlib.suppress(Exception):
                channel = await self.layer.new_channel()
                await self.layer.group_add(CONTROL_GROUP, channel)
                return channel

    async def listen(self, run: LiveRun) -> None:
        while True:
            message = await run.control.get()
            if message["type"] == "run.cancel":
                run.stop()
            elif message["type"] == "run.snapshot":
                run.elsewhere = True
                try:
                    await get_channel_layer().send(message["reply_to"], {"type": "run.snapshot", "run": run.snapshot()})
                except Exception:
                    logger.warning("run %s: its text so far could not be sent", run.run_id, exc_info=True)
            elif message["type"] == "run.done":
                return

    async def stop_listening(self, run: LiveRun, listener: asyncio.Task) -> None:
        """End the listener by a message rather than a cancel, so that a reply it is sending goes out whole."""
        self._forget(run)
        run.control.put_nowait({"type": "run.done"})
        try:
            await asyncio.wait_for(asyncio.shield(listener), timeout=5)
        except Exception:  # a reply held up by the layer for 5 s (or failed): nothing else would end the listener
            listener.cancel()

    def _forget(self, run: LiveRun) -> None:
        key = str(run.conversation.pk)
        # By identity: a LiveRun is a dataclass, whose == would compare every field, its text so far among them.
        if runs := [other for other in self._runs.get(key, ()) if other is not run]:
            self._runs[key] = runs
        else:
            self._runs.pop(key, None)


def _failed(task: asyncio.Task) -> bool:
    return task.done() and (task.cancelled() or task.exception() is not None)
