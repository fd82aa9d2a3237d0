"""Rate limits: a sliding window on this process (frames per socket), and a window and a count of things held at
once that every process shares when there is Redis (messages and files being read, per user)."""

from __future__ import annotations

import collections
import contextlib
import functools
import time
from collections.abc import Hashable, Iterator

import redis
from django.conf import settings
from django.core.cache import DEFAULT_CACHE_ALIAS, BaseCache, caches
from redis.backoff import NoBackoff
from redis.retry import Retry


@functools.cache
def _cache() -> BaseCache:
    """One cache client for the whole process. Django's `cache` is one per async context, that is per socket: with
    Redis, each socket's first message opened a connection pool and a connection of its own."""
    return caches.create_connection(DEFAULT_CACHE_ALIAS)


# Each wait for Redis, to connect or for an answer, in seconds. A message's count is taken on the event loop where
# DATABASE_TRIP_ON_LOOP is on (runs.loop_trip), so that a Redis that stopped answering costs it this, not every
# socket of the process for as long as Redis is away.
REDIS_TIMEOUT = 0.25


@functools.cache
def _redis() -> redis.Redis | None:
    """Redis itself, when there is one, for the count that every run's start takes: in one round trip, where the
    cache's API takes four, each one more wait in the start's trip to the database (docs/benchmarks.md). A command
    that fails is tried once more, at once, on a new connection: after Redis restarts, each pooled connection fails
    once. redis-py's own default, ten more tries spaced out to a second, would hold the event loop for seconds."""
    if not settings.REDIS_URL:
        return None
    return redis.Redis.from_url(
        settings.REDIS_URL,
        socket_timeout=REDIS_TIMEOUT,
        socket_connect_timeout=REDIS_TIMEOUT,
        retry=Retry(NoBackoff(), 1),
    )


class SlidingWindow:
    """At most `limit` events in any `seconds`, on this process."""

    def __init__(self, limit: int, *, seconds: float):
        self.limit = limit
        self.seconds = seconds
        self.events: collections.deque[float] = collections.deque()

    def allow(self) -> bool:
        """Count an event now; False (and not counted) when the window is full."""
        now = time.monotonic()
        while self.events and self.events[0] <= now - self.seconds:
            self.events.popleft()
        if len(self.events) >= self.limit:
            return False
        self.events.append(now)
        return True


class SharedWindow:
    """At most `limit` events per key in any `seconds`, counted in Redis, when there is one, so that every process
    using it agrees; else in this process's cache.

    A sliding window estimated from two fixed ones: the previous window's count, weighted by how much of it is
    still within `seconds`, plus the current one's.
    """

    def __init__(self, name: str, limit: int, *, seconds: int):
        self.name = name
        self.limit = limit
        self.seconds = seconds

    def allow(self, key: Hashable) -> bool:
        """Count an event now; False when over the limit. Blocking: call it from sync code."""
        window, into = divmod(time.time(), self.seconds)
        current, previous = (f"ratelimit:{self.name}:{key}:{int(window) - back}" for back in (0, 1))
        client = _redis()
        if client is None:
            cache = _cache()
            cache.add(current, 0, timeout=2 * self.seconds)
            count, before = cache.incr(current), cache.get(previous, 0)
        else:
            pipe = client.pipeline(transaction=False)
            pipe.set(current, 0, ex=2 * self.seconds, nx=True).incr(current).get(previous)
            _, count, before = pipe.execute()
        return int(before or 0) * (1 - into / self.seconds) + count <= self.limit


class Full(Exception):
    pass


class SharedSlots:
    """At most `limit` held at once per key, counted in the cache so that every process using it agrees.

    A count whose holder died without giving it back is forgotten `seconds` after it was last taken.
    """

    def __init__(self, name: str, *, seconds: int):
        self.name = name
        self.seconds = seconds

    @contextlib.contextmanager
    def hold(self, key: Hashable, limit: int) -> Iterator[None]:
        """Hold one slot for the block; Full when `limit` are held already."""
        name = f"slots:{self.name}:{key}"
        cache = _cache()
        cache.add(name, 0, timeout=self.seconds)
        held = cache.incr(name)
        cache.touch(name, self.seconds)
        try:
            if held > limit:
                raise Full
            yield
        finally:
            with contextlib.suppress(ValueError):  # the count was forgotten meanwhile
                cache.decr(name)
