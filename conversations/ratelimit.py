"""A sliding window of events per key, on this process: messages per user, frames per socket."""

from __future__ import annotations

import collections
import time
from collections.abc import Hashable


class SlidingWindow:
    """At most `limit` events per key in any `seconds`."""

    def __init__(self, limit: int, *, seconds: float):
        self.limit = limit
        self.seconds = seconds
        self.events: dict[Hashable, collections.deque[float]] = collections.defaultdict(collections.deque)

    def allow(self, key: Hashable = None) -> bool:
        """Count an event for `key` now; False (and not counted) when the window is full."""
        now = time.monotonic()
        events = self.events[key]
        while events and events[0] <= now - self.seconds:
            events.popleft()
        if len(events) >= self.limit:
            return False
        events.append(now)
        return True
