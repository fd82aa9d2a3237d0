"""A new message's trip to the database taken by the event loop itself (DATABASE_TRIP_ON_LOOP), every wait in it
bounded, so that a busy or absent database costs one trip and never holds every socket of the process up.

On SQLite, the loop thread's own connection takes the trip, waits at most LOCK_WAIT_MS for another writer's
lock, and leaves copying the write-ahead log into the database to the database threads. On PostgreSQL, the loop
has a connection of its own, outside the pool: opened, checked and opened again in a database thread, and taken up
by the loop only once it is known good. Its locks wait at most LOCK_WAIT_MS, its statements run at most
STATEMENT_MS on the server, its commits do not wait for the server's disk, and a watchdog shuts its socket when a
trip outlasts TRIP_DEADLINE, for a server that does not answer at all. When a trip cannot be taken here, or one of
those limits runs out, `Unavailable` says so, its transaction has been rolled back, and the caller hands it to a
database thread (docs/benchmarks.md)."""

from __future__ import annotations

import asyncio
import contextlib
import copy
import logging
import os
import socket
import threading
import time
from collections.abc import Iterator
from concurrent.futures import Executor

from django.conf import settings
from django.db import DEFAULT_DB_ALIAS, DatabaseError, InterfaceError, OperationalError, connections
from django.db.utils import load_backend
from redis import RedisError

logger = logging.getLogger(__name__)

LOCK_WAIT_MS = 20
STATEMENT_MS = 100
# A trip is a few milliseconds; past this the server is taken as not answering.
TRIP_DEADLINE = 0.25
# How long after a failed attempt to open the loop's PostgreSQL connection the next one is made.
REOPEN_AFTER = 1.0

UNAVAILABLE = (OperationalError, InterfaceError, RedisError)


class Unavailable(Exception):
    """The trip was not taken on the event loop, or was rolled back there: a database thread takes it."""


@contextlib.contextmanager
def loop_set_aside() -> Iterator[None]:
    """Django refuses to run a query while an event loop runs in the thread, as it would hold every socket up: the
    loop is set aside for a trip whose every wait is bounded."""
    loop = asyncio.get_running_loop()
    asyncio._set_running_loop(None)
    try:
        yield
    finally:
        asyncio._set_running_loop(loop)


class Watchdog:
    """Shuts the socket of a trip that outlasts its deadline: the driver's blocked read ends and the trip fails."""

    def __init__(self) -> None:
        self._changed = threading.Condition()
        self._fd: int | None = None
        self._deadline = 0.0
        self._idle = False
        self._thread: threading.Thread | None = None

    @contextlib.contextmanager
    def watching(self, fd: int, seconds: float) -> Iterator[None]:
        with self._changed:
            self._fd, self._deadline = fd, time.monotonic() + seconds
            if self._thread is None:
                self._thread = threading.Thread(target=self._watch, name="database-watchdog", daemon=True)
                self._thread.start()
            elif self._idle:
                # Only an idle watchdog is woken: one waiting for an earlier deadline wakes by itself, finds this
                # later one and waits on, so a steady stream of trips costs it a wake-up per deadline, not per trip.
                self._changed.notify()
        try:
            yield
        finally:
            with self._changed:
                self._fd = None

    def _watch(self) -> None:
        with self._changed:
            while True:
                if self._fd is None:
                    self._idle = True
                    self._changed.wait()
                    self._idle = False
                    continue
                left = self._deadline - time.monotonic()
                if left > 0:
                    self._changed.wait(left)
                    continue
                logger.warning("a trip to the database on the event loop outlasted its deadline: its socket is shut")
                # A duplicate of the descriptor: shutting it down shuts the socket the driver reads.
                with contextlib.suppress(OSError), socket.socket(fileno=os.dup(self._fd)) as watched:
                    watched.shutdown(socket.SHUT_RDWR)
                self._fd = None


WATCHDOG = Watchdog()


class PostgresConnection:
    """The event loop's own PostgreSQL connection, which the loop uses only while `ready`: opened and mended by a
    database thread (`executor`), never on the loop."""

    def __init__(self, executor: Executor) -> None:
        self.executor = executor
        self.wrapper = None
        self.fd = -1
        self.ready = False
        self._mending = False
        self._next_try = 0.0

    def take(self):
        """The connection, ready; or None, and a database thread sees to it."""
        if self.ready:
            return self.wrapper
        if not self._mending and time.monotonic() >= self._next_try:
            self._mending = True
            if self.wrapper is None:
                self.wrapper = self._wrapper()
            self.executor.submit(self._mend)
        return None

    def failed(self) -> None:
        self.ready = False
        self.take()

    def close(self) -> None:
        self.ready = False
        if self.wrapper is not None:
            self.wrapper.close()

    @staticmethod
    def _wrapper():
        """Django's connection for the default database, as configured now (the tests' database under tests), but
        opened directly rather than borrowed from the pool, and with the loop's limits on the server's side."""
        config = copy.deepcopy(connections.settings[DEFAULT_DB_ALIAS])
        options = config["OPTIONS"]
        options.pop("pool", None)
        # A commit that waited for the server's disk (3 ms on a small machine) would hold every socket of the process
        # meanwhile. One that does not can be lost only by a crash of PostgreSQL itself within the next fraction of
        # a second, as a power loss can lose SQLite's under PRAGMA synchronous=NORMAL; the next commit that waits
        # for the disk writes it too (docs/decisions.md).
        limits = f"-c lock_timeout={LOCK_WAIT_MS} -c statement_timeout={STATEMENT_MS} -c synchronous_commit=off"
        options["options"] = f"{options.get('options', '')} {limits}".strip()
        options.setdefault("connect_timeout", 2)
        wrapper = load_backend(config["ENGINE"]).DatabaseWrapper(config, DEFAULT_DB_ALIAS)
        wrapper.inc_thread_sharing()
        return wrapper

    def _mend(self) -> None:
        try:
            if not self.wrapper.is_usable():
                if self.wrapper.connection is not None:
                    self._check_the_pool()
                with contextlib.suppress(DatabaseError, self.wrapper.Database.Error):
                    self.wrapper.close()
                self.wrapper.connect()
            self.wrapper.errors_occurred = False
            self.fd = self.wrapper.connection.pgconn.socket
            self.ready = True
        except (DatabaseError, self.wrapper.Database.Error) as exc:
            logger.warning("the event loop's database connection could not be opened (%s); trying again soon", exc)
            self._next_try = time.monotonic() + REOPEN_AFTER
        finally:
            self._mending = False

    @staticmethod
    def _check_the_pool() -> None:
        """The server ended this connection, as it does as it restarts: the pool's idle connections have most likely
        gone too. They are checked all at once, and replaced, here. Found one by one by the threads that borrow
        them, each dead one would cost its borrower a wait (psycopg-pool waits 1 s after the first failed check,
        then 2, then 4), and a handful of them a whole DATABASE_POOL_TIMEOUT."""
        pool = connections[DEFAULT_DB_ALIAS].pool
        if not pool.closed:
            pool.check()

    @contextlib.contextmanager
    def trip(self) -> Iterator[None]:
        wrapper = self.take()
        if wrapper is None:
            raise Unavailable
        with loop_set_aside():
            # Set once the loop is aside: while it runs, asgiref keeps the thread's connections apart, per task.
            previous = connections[DEFAULT_DB_ALIAS]
            connections[DEFAULT_DB_ALIAS] = wrapper
            try:
                with WATCHDOG.watching(self.fd, TRIP_DEADLINE):
                    yield
            except UNAVAILABLE as exc:
                self.failed()
                raise Unavailable from exc
            finally:
                connections[DEFAULT_DB_ALIAS] = previous


class SqliteConnection:
    """The loop thread's own SQLite connection, which waits at most LOCK_WAIT_MS for another writer's lock, and
    leaves checkpoints to the database threads' connections."""

    def __init__(self) -> None:
        self._set_up = None  # the driver's connection last told to checkpoint nothing

    @contextlib.contextmanager
    def trip(self) -> Iterator[None]:
        configured = round(connections.settings[DEFAULT_DB_ALIAS]["OPTIONS"].get("timeout", 5) * 1000)
        with loop_set_aside():
            db = connections[DEFAULT_DB_ALIAS]
            try:
                self._leave_checkpoints(db)
                self._busy_timeout(db, LOCK_WAIT_MS)
                try:
                    yield
                finally:
                    self._busy_timeout(db, configured)
            except UNAVAILABLE as exc:
                raise Unavailable from exc

    def _leave_checkpoints(self, db) -> None:
        """The commit that takes the write-ahead log past 1,000 pages (some 60 messages) copies it into the database
        file and syncs it: 4-5 ms. None on this connection does; the next commit of a database thread (an answer
        flushed, saved or ended) does it, and the event loop goes on meanwhile."""
        db.ensure_connection()
        if db.connection is not self._set_up:
            with db.cursor() as cursor:
                cursor.execute("PRAGMA wal_autocheckpoint = 0")
            self._set_up = db.connection

    @staticmethod
    def _busy_timeout(db, milliseconds: int) -> None:
        with db.wrap_database_errors:
            db.connection.execute(f"PRAGMA busy_timeout = {milliseconds}")


def loop_connection(executor: Executor) -> SqliteConnection | PostgresConnection | None:
    """The event loop's connection to the configured database, or None where DATABASE_TRIP_ON_LOOP is off."""
    if not settings.DATABASE_TRIP_ON_LOOP:
        return None
    if connections.settings[DEFAULT_DB_ALIAS]["ENGINE"].endswith("sqlite3"):
        return SqliteConnection()
    return PostgresConnection(executor)
