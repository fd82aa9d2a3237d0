"""The shared message window, counted where the settings put it: in Redis when REDIS_URL is set (CI's second
pass), else in this process's cache."""

import time
import types
import uuid

import pytest

from conversations import ratelimit
from conversations.ratelimit import SharedWindow


@pytest.fixture
def clock(monkeypatch):
    """time.time as the window reads it, at the start of a fixed window of 60 s."""
    now = types.SimpleNamespace(time=lambda: 0.0, monotonic=time.monotonic)
    monkeypatch.setattr(ratelimit, "time", now)
    start = (time.time() // 60 + 1) * 60

    def at(seconds: float) -> None:
        now.time = lambda: start + seconds

    at(0)
    return at


def test_the_limit_is_per_key_and_the_next_event_over_it_is_refused(clock):
    window = SharedWindow(f"test-{uuid.uuid4()}", 3, seconds=60)
    assert [window.allow("alice") for _ in range(4)] == [True, True, True, False]
    assert window.allow("bob")


def test_the_previous_window_counts_for_the_part_of_it_still_within_the_last_minute(clock):
    window = SharedWindow(f"test-{uuid.uuid4()}", 3, seconds=60)
    assert [window.allow("alice") for _ in range(3)] == [True, True, True]
    clock(60 + 30)  # half of the previous window is within the last 60 s: it counts as 1.5
    assert [window.allow("alice") for _ in range(2)] == [True, False]
    clock(120 + 1)  # the window before is the one with one event (and one refused): 2 × 59/60
    assert window.allow("alice")
    clock(240)  # a whole window with nothing in it
    assert [window.allow("alice") for _ in range(4)] == [True, True, True, False]
