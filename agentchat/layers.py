"""The channel layers: for a single process (no Redis), Channels' in-memory layer, at a cost per message that does
not grow with the number of sockets; for several, channels_redis's pub/sub layer, which tells its receivers when
Redis was lost and whose group sends a cancel cannot cut."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable
from typing import NamedTuple

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
        self.group_send_here(group, message)

    async def listeners_elsewhere(self, group) -> bool:
        return False  # one process: there is no elsewhere

    async def joined(self, group) -> None:
        """Group members get what is sent from the moment group_add returns."""

    def group_send_here(self, group, message):
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
# Seconds a socket waits for Redis to confirm its subscription to a group before it goes on regardless.
SUBSCRIBE_WAIT = 5.0


class _Here(NamedTuple):
    """A message put straight on a receiver's queue in this process, as it was sent: nothing to decode."""

    message: dict


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
        if isinstance(message, _Here):
            return message.message
        return super().deserialize(message)

    async def listeners_elsewhere(self, group) -> bool:
        """Whether a subscriber other than this layer object's listens to the group: another process, most often.

        Asked of Redis (PUBSUB NUMSUB). A socket's group_add is followed by `joined`, which returns once Redis has
        its subscription, and only then does it look whether a run is going on: so a run that starts later counts
        it here, and a run that had started is asked by it for its snapshot (see conversations.runs.control)."""
        layer = self._get_layer()
        channel = layer._get_group_channel_name(group)
        shard = layer._get_shard(channel)
        shard._ensure_redis()
        [(_, subscribers)] = await shard._redis.pubsub_numsub(channel)
        return subscribers > (1 if channel in shard._subscribed_to else 0)

    async def joined(self, group) -> None:
        layer = self._get_layer()
        channel = layer._get_group_channel_name(group)
        await layer._get_shard(channel).confirmed(channel)

    def group_send_here(self, group, message):
        """To this layer object's members of the group, at once, and to no one elsewhere."""
        layer = self._get_layer()
        for channel in layer.groups.get(layer._get_group_channel_name(group), ()):
            if (queue := layer.channels.get(channel)) is not None:
                queue.put_nowait(_Here(message))

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
    only logs it and tries again), and when redis-py connected again by itself between two reads; and which knows
    when Redis has confirmed a subscription (the library sends SUBSCRIBE and does not wait for its answer)."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._confirmed: set[str] = set()
        self._waiting: dict[str, list[asyncio.Future]] = {}

    async def subscribe(self, channel):
        if channel not in self._subscribed_to:
            self._confirmed.discard(channel)
        await super().subscribe(channel)

    async def unsubscribe(self, channel):
        await super().unsubscribe(channel)
        self._confirmed.discard(channel)

    async def confirmed(self, channel: str) -> None:
        """Returns once Redis has confirmed the subscription to `channel`, or after SUBSCRIBE_WAIT."""
        if channel in self._confirmed or channel not in self._subscribed_to:
            return
        waiter = asyncio.get_running_loop().create_future()
        self._waiting.setdefault(channel, []).append(waiter)
        try:
            await asyncio.wait_for(waiter, SUBSCRIBE_WAIT)
        except TimeoutError:
            logger.warning("Redis did not confirm a subscription within %.0f s", SUBSCRIBE_WAIT)
        finally:
            waiting = self._waiting.get(channel, [])
            if waiter in waiting:
                waiting.remove(waiter)
            if not waiting:
                self._waiting.pop(channel, None)

    def _on_subscribed(self, channel: str) -> None:
        self._confirmed.add(channel)
        for waiter in self._waiting.pop(channel, []):
            if not waiter.done():
                waiter.set_result(None)

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
                    message = await self._pubsub.get_message(timeout=0.1)
                    if message is None:
                        continue
                    if message["type"] == "subscribe":
                        self._on_subscribed(_text(message["channel"]))
                    elif message["type"] == "message":
                        self._receive_message(message)
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


def _text(name: str | bytes) -> str:
    return name.decode() if isinstance(name, bytes) else name
