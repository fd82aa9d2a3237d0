"""The control plane: a live run listens on a channel in its conversation's control group, so a `cancel` or a
joining socket's request for the text so far reaches it from any process."""

from __future__ import annotations

import asyncio
import contextlib
import logging

from channels.layers import DEFAULT_CHANNEL_LAYER, channel_layers, get_channel_layer

from ..models import Conversation
from .frames import control_group
from .live import LiveRun

logger = logging.getLogger(__name__)

# Seconds between a run's tries to join its control group again after the channel layer failed.
LAYER_RETRY = 0.5


class ControlPlane:
    def __init__(self) -> None:
        self._layer = None

    @property
    def layer(self):
        """A layer object of the runs' own for their control channels.

        Ending a run cancels its pending receive; on the layer object the sockets share, a cancelled
        receive can swallow or hold up a message meant for a socket of this process.
        """
        if self._layer is None:
            self._layer = channel_layers.make_backend(DEFAULT_CHANNEL_LAYER)
        return self._layer

    async def open(self, run: LiveRun) -> None:
        """Join the run's control group now, so that a `cancel` sent right after the message reaches it."""
        run.control_channel = await self.layer.new_channel()
        await self.layer.group_add(control_group(run.conversation.pk), run.control_channel)

    async def cancel(self, conversation: Conversation) -> None:
        await self.layer.group_send(control_group(conversation.pk), {"type": "run.cancel"})

    async def request_snapshot(self, conversation: Conversation, reply_to: str) -> None:
        """Ask the live run (on whichever process) for its text so far; the reply goes to `reply_to`."""
        await self.layer.group_send(control_group(conversation.pk), {"type": "run.snapshot", "reply_to": reply_to})

    async def listen(self, run: LiveRun) -> None:
        group = control_group(run.conversation.pk)
        try:
            while True:
                try:
                    message = await self.layer.receive(run.control_channel)
                    if message["type"] == "run.snapshot":
                        run.elsewhere = True
                        reply = {"type": "run.snapshot", "run": run.snapshot()}
                        await get_channel_layer().send(message["reply_to"], reply)
                except Exception:
                    # The connection to Redis was lost, and the channel with it: listen on a new one in the group,
                    # so a cancel still reaches the run.
                    logger.warning("run %s: the channel layer failed; listening again", run.run_id, exc_info=True)
                    await self._join_again(group, run)
                    continue
                if message["type"] == "run.cancel":
                    run.stop()
                elif message["type"] == "run.done":
                    return
        finally:
            with contextlib.suppress(Exception):
                await self.layer.group_discard(group, run.control_channel)

    async def _join_again(self, group: str, run: LiveRun) -> None:
        while True:
            await asyncio.sleep(LAYER_RETRY)
            with contextlib.suppress(Exception):
                channel = await self.layer.new_channel()
                await self.layer.group_add(group, channel)
                run.control_channel = channel
                return

    async def stop_listening(self, run: LiveRun, listener: asyncio.Task) -> None:
        """End the listener by a message rather than a cancel: on channels_redis a cancelled receive can
        swallow or hold up messages for the other receivers of the same layer object (the other runs)."""
        try:
            await self.layer.send(run.control_channel, {"type": "run.done"})
            await asyncio.wait_for(asyncio.shield(listener), timeout=5)
        except Exception:  # the layer is down, or the wait timed out: nothing else would end the listener
            listener.cancel()
