"""The channel layers: for a single process (no Redis), Channels' in-memory layer, at a cost per message that does
not grow with the number of sockets; for several, channels_redis's pub/sub layer, which tells its receivers when
Redis was lost and whose group sends a cancel cannot cut."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable

from channels.layers import InMemoryChannelLayer
from channels_redis.pubsub import RedisPubSubChannelLayer, RedisSingleShardConnection
from redis.asyncio.client import PubSub
from redis.exceptions import ConnectionError as RedisConnectionError

logger = logging.getLogger(__name__)

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


# Put on each receiver's queue when the connection to Redis is lost: what was published meanwhile is gone.
LOST = object()
# Seconds between tries to read from Redis again after the connection was lost.
RECONNECT_PAUSE = 0.5


class RedisLost(RedisConnectionError):
    """Messages of this channel may have been published while the connection to Redis was down."""


class RedisChannelLayer(RedisPubSubChannelLayer):
    """channels_redis's pub/sub layer: a group send is one PUBLISH and each process reads one subscription, where
    its list-based layer made several round trips and ran a script per send, and blocked a read per process
    (docs/benchmarks.md). Pub/sub keeps nothing for a subscriber that was away, so when the connection to Redis is
    lost every receive of the process fails (its sockets close, and their pages reconnect and load what they
    missed) rather than wait quietly for messages that are gone.

    A group send is carried through a cancel (a Stop, as a run sends a frame): cut halfway, its connection could
    hold up the sends after it.
    """

    def _get_layer(self):
        layer = super()._get_layer()
        if not isinstance(layer._shards[0], _WatchedShard):
            layer._shards = [_WatchedShard(shard.host, layer) for shard in layer._shards]
        return layer

    def deserialize(self, message):
        if message is LOST:
            raise RedisLost("The connection to Redis was lost; messages sent meanwhile are gone.")
        return super().deserialize(message)

    async def receive(self, channel):
        layer = self._get_layer()
        try:
            return await layer.receive(channel)
        except RedisLost:
            # As the library does for a receive that was cancelled: the channel is dropped, its receiver gone.
            if layer.channels.pop(channel, None) is not None:
                with contextlib.suppress(Exception):
                    await layer._get_shard(channel).unsubscribe(channel)
            raise

    async def group_send(self, group, message):
        await asyncio.shield(self._get_layer().group_send(group, message))


class _WatchedShard(RedisSingleShardConnection):
    """A shard whose receivers are told when its subscription's connection was lost: when reading fails (the library
    only logs it and tries again), and when redis-py connected again by itself between two reads."""

    def _ensure_redis(self):
        if self._redis is None:
            super()._ensure_redis()
            self._pubsub = _WatchedPubSub(self._redis.connection_pool, lost=self._lost)

    def _lost(self) -> None:
        """Every channel subscribed before is told; one subscribing now (its subscription made the new connection)
        has missed nothing."""
        logger.warning("the connection to Redis was lost: the sockets close, to load what they missed")
        for name, queue in list(self.channel_layer.channels.items()):
            if name in self._subscribed_to:
                queue.put_nowait(LOST)

    async def _do_receiving(self):
        while True:
            try:
                if self._pubsub and self._pubsub.subscribed:
                    self._receive_message(await self._pubsub.get_message(ignore_subscribe_messages=True, timeout=0.1))
                else:
                    await asyncio.sleep(0.1)
            except Exception:
                # Most often Redis gone; otherwise the connection is in a state nothing read on it can be trusted
                # from (a subscription reading its reply as this loop reads). Either way, tried again.
                logger.debug("reading from Redis failed", exc_info=True)
                self._lost()
                await asyncio.sleep(RECONNECT_PAUSE)


class _WatchedPubSub(PubSub):
    """redis-py subscribes again on each new connection: messages published in between are gone."""

    def __init__(self, *args, lost: Callable[[], None], **kwargs):
        super().__init__(*args, **kwargs)
        self._lost = lost

    async def on_connect(self, connection) -> None:
        self._lost()
        await super().on_connect(connection)
