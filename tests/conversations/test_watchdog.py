"""The watchdog of the event loop's PostgreSQL trips: a socket whose trip outlasts its deadline is shut, so that the
read blocked on it ends; one whose trip ended in time is left alone."""

from __future__ import annotations

import socket
import time

from conversations.runs.loop_trip import Watchdog

# How long a test waits for a read that the watchdog should end; far past any deadline used here.
PATIENCE = 5


def pair() -> tuple[socket.socket, socket.socket]:
    ours, theirs = socket.socketpair()
    ours.settimeout(PATIENCE)
    return ours, theirs


def test_a_read_past_its_deadline_ends_with_the_socket_shut():
    ours, theirs = pair()
    with ours, theirs, Watchdog().watching(ours.fileno(), 0.05):
        assert ours.recv(1) == b""


def test_a_trip_that_ended_in_time_leaves_its_socket_alone():
    watchdog = Watchdog()
    ours, theirs = pair()
    with ours, theirs:
        with watchdog.watching(ours.fileno(), 0.05):
            pass
        time.sleep(0.1)  # past the deadline the trip no longer has
        theirs.send(b"x")
        assert ours.recv(1) == b"x"


def test_a_trip_armed_while_the_watchdog_waits_for_an_earlier_deadline_is_watched_too():
    watchdog = Watchdog()
    first, first_peer = pair()
    second, second_peer = pair()
    with first, first_peer, second, second_peer:
        with watchdog.watching(first.fileno(), 0.05):
            pass
        with watchdog.watching(second.fileno(), 0.2):
            assert second.recv(1) == b""
        first_peer.send(b"x")
        assert first.recv(1) == b"x"
