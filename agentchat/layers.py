"""The channel layers: for a single process (no Redis), Channels' in-memory layer, at a cost per message that does
not grow with the number of sockets; for several, channels_redis's, whose group sends a cancel cannot cut."""

from __future__ import annotations

import asyncio
import time

from channels.layers import InMemoryChannelLayer
from channels_redis.core import RedisChannelLayer as ChannelsRedisLayer

# Expired messages and group memberships are swept at most this often, not on every send and receive.
SWEEP_INTERVAL = 1.0


class LocalChannelLayer(InMemoryChannelLayer):
    """Channels' in-memory layer sweeps every channel and group on every send and receive, and a group send makes a
    task and a deep copy for each member: a streamed token cost work for every socket of the process, not only
    for those of its conversation. Here a group send puts the one message on each member's queue, and the sweep
    runs once a second.

    Messages are shared between their receivers, so nothing may change a message once it is sent.
    """

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.swept = 0.0

    def _clean_expired(self) -> None:
        now = time.monotonic()
        if now - self.swept >= SWEEP_INTERVAL:
            self.swept = now
            super()._clean_expired()

    async def group_send(self, group, message):
        assert isinstance(message, dict), "Message is not a dict"
        self.require_valid_group_name(group)
        self._clean_expired()
        expires = time.time() + self.expiry
        for channel in list(self.groups.get(group, ())):
            queue = self.channels.setdefault(channel, asyncio.Queue(maxsize=self.get_capacity(channel)))
            try:
                queue.put_nowait((expires, message))
            except asyncio.QueueFull:
                # As in Channels' layer: a socket this far behind loses the message, not the sender.
                continue


class RedisChannelLayer(ChannelsRedisLayer):
    """channels_redis's layer. A group send makes several round trips to Redis; a cancel landing between them (a
    Stop, as a run sends a frame) would leave the connection holding up the next sends, so it is carried through.
    The in-memory layer needs no such care: its sends never wait."""

    async def group_send(self, group, message):
        await asyncio.shield(super().group_send(group, message))
