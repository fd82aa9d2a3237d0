"""The database threads' connections (conversations.runs.db.THREADS), handed back by the tests themselves.

In production, each trip to a database thread gives its connection back as it ends (Channels' database_sync_to_async
closes old connections around each call). Channels' test communicator turns that closing off, so under it each
thread keeps its connection from call to call: a test that ends the server's sessions, and the end of the test run,
hand them back here."""

from __future__ import annotations

import threading

from django.db import connections

from conversations.runs import db


def database_threads_connections_closed() -> None:
    """Each database thread closes its connections; they wait for each other, so that each thread takes one."""
    threads = db.THREADS._max_workers
    together = threading.Barrier(threads)

    def close() -> None:
        together.wait(timeout=10)
        connections.close_all()

    for closing in [db.THREADS.submit(close) for _ in range(threads)]:
        closing.result()
