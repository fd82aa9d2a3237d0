"""A new message's trip to the database, taken by the event loop itself where DATABASE_TRIP_ON_LOOP is on, so a busy
database thread does not hold it up; when the loop cannot take it (another writer holds the lock, the server ended
the loop's connection or stopped answering), a database thread takes it, and the socket's user sees no difference."""

from __future__ import annotations

import asyncio
import sqlite3
import threading

import psycopg
import pytest
from asgiref.sync import sync_to_async
from django.conf import settings
from django.db import connection, connections

from conversations.models import Message
from conversations.runs import db, loop_trip
from tests.database_threads import database_threads_connections_closed
from tests.fake_provider import Reply
from tests.tcp_proxy import TCPProxy

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(db.LOOP is None, reason="DATABASE_TRIP_ON_LOOP is off: the database threads take every trip"),
]
sqlite_only = pytest.mark.skipif(connection.vendor != "sqlite", reason="the loop thread's own SQLite connection")
postgresql_only = pytest.mark.skipif(
    connection.vendor != "postgresql", reason="the event loop's own PostgreSQL connection"
)

HI = {"type": "message", "content": "Hi", "client_id": "c1"}
AND_NOW = {"type": "message", "content": "And now?", "client_id": "c2"}
TWO_TURNS = [("user", "Hi"), ("assistant", "Hello there"), ("user", "And now?"), ("assistant", "Still here")]


async def stored(conversation) -> list[tuple[str, str]]:
    rows = Message.objects.filter(conversation=conversation).order_by("id").values_list("role", "content")
    return await sync_to_async(list)(rows)


async def loop_ready(loop_connection=None) -> None:
    """On PostgreSQL, the loop's connection opened by a database thread, as the first trip of a process has it."""
    loop_connection = loop_connection or db.LOOP
    if not isinstance(loop_connection, loop_trip.PostgresConnection):
        return
    async with asyncio.timeout(10):
        while loop_connection.take() is None:
            await asyncio.sleep(0.01)


async def started_while_the_database_threads_are_busy(socket, frame) -> None:
    free = threading.Event()
    busy = [db.THREADS.submit(free.wait, 10) for _ in range(settings.DATABASE_THREADS)]
    try:
        await socket.send(frame)
        opening = await socket.receive_until("run_started")
        assert not any(work.done() for work in busy)
    finally:
        free.set()
    echo = opening[0]
    assert echo["type"] == "message" and echo["message"]["content"] == frame["content"]
    assert echo["client_id"] == frame["client_id"]


async def test_a_message_is_taken_and_its_run_started_while_the_database_threads_are_busy(
    llm, sockets, conversation, alice
):
    llm.script(Reply(text="Hello there"))
    socket = await sockets(conversation, alice)
    await loop_ready()
    await started_while_the_database_threads_are_busy(socket, HI)
    finished = (await socket.receive_until("run_finished"))[-1]
    assert finished["status"] == "completed"
    assert await stored(conversation) == [("user", "Hi"), ("assistant", "Hello there")]


def setting(sql: str):
    """The one value `sql` reads, on the connection the thread (or the loop's trip) has."""
    with connection.cursor() as cursor:
        cursor.execute(sql)
        [(value,)] = cursor.fetchall()
    return value


@sqlite_only
async def test_the_loop_leaves_copying_the_log_into_the_database_to_the_database_threads(
    llm, sockets, conversation, alice
):
    # Copying the write-ahead log into the database file, and syncing it, takes milliseconds: not on the loop.
    llm.script(Reply(text="Hello there"))
    socket = await sockets(conversation, alice)
    await started_while_the_database_threads_are_busy(socket, HI)
    assert (await socket.receive_until("run_finished"))[-1]["status"] == "completed"

    with loop_trip.loop_set_aside():
        on_the_loop = setting("PRAGMA wal_autocheckpoint")
    in_a_thread = await db.database_sync_to_async(setting)("PRAGMA wal_autocheckpoint")
    assert (on_the_loop, in_a_thread) == (0, 1000)
    assert await stored(conversation) == [("user", "Hi"), ("assistant", "Hello there")]


@postgresql_only
async def test_the_loop_does_not_wait_for_postgresql_to_write_its_commits_to_disk(llm, sockets, conversation, alice):
    # Syncing a commit to disk takes milliseconds: not on the loop. The database threads' commits wait for it.
    llm.script(Reply(text="Hello there"))
    socket = await sockets(conversation, alice)
    await loop_ready()
    await started_while_the_database_threads_are_busy(socket, HI)
    assert (await socket.receive_until("run_finished"))[-1]["status"] == "completed"

    with db.LOOP.trip():
        on_the_loop = setting("SHOW synchronous_commit")
    in_a_thread = await db.database_sync_to_async(setting)("SHOW synchronous_commit")
    assert (on_the_loop, in_a_thread) == ("off", "on")
    assert await stored(conversation) == [("user", "Hi"), ("assistant", "Hello there")]


async def taken_on_the_loop_again(socket, conversation) -> None:
    """The next message is taken by the event loop once more: its run starts while every database thread is busy."""
    await loop_ready()
    await started_while_the_database_threads_are_busy(socket, AND_NOW)
    assert (await socket.receive_until("run_finished"))[-1]["status"] == "completed"
    assert await stored(conversation) == TWO_TURNS


def other_postgresql() -> psycopg.Connection:
    database = settings.DATABASES["default"]
    return psycopg.connect(
        host=database["HOST"], port=database["PORT"], user=database["USER"], dbname=database["NAME"], autocommit=True
    )


async def test_a_message_waits_in_a_database_thread_while_another_writer_holds_the_conversation(
    llm, sockets, conversation, alice
):
    llm.script(Reply(text="Hello there"))
    socket = await sockets(conversation, alice)
    await loop_ready()
    if connection.vendor == "postgresql":
        other = await sync_to_async(other_postgresql)()
        other.execute("BEGIN")
        other.execute("SELECT 1 FROM conversations_conversation WHERE id = %s FOR UPDATE", [conversation.pk])
        commit = other.commit
    else:
        other = sqlite3.connect(settings.DATABASES["default"]["NAME"], isolation_level=None)
        other.execute("BEGIN IMMEDIATE")
        commit = lambda: other.execute("COMMIT")  # noqa: E731
    # Committed by this event loop: had the message's trip waited on the loop for the lock, nothing would commit.
    asyncio.get_running_loop().call_later(0.5, commit)
    try:
        await socket.send(HI)
        frames = await socket.receive_until("run_finished")
    finally:
        other.close()
    assert frames[0]["type"] == "message" and frames[0]["message"]["content"] == "Hi"
    assert frames[-1]["status"] == "completed"
    llm.script(Reply(text="Still here"))
    await taken_on_the_loop_again(socket, conversation)


@pytest.fixture
def end_every_session():
    """Ends every session of the test database, as a restart of PostgreSQL would; then hands back the connections
    the test's threads hold (tests/database_threads.py), the main thread's last, for the database's flush."""

    def end() -> None:
        with other_postgresql() as other:
            other.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = %s AND pid <> pg_backend_pid()",
                [settings.DATABASES["default"]["NAME"]],
            )
        database_threads_connections_closed()
        connections.close_all()

    yield sync_to_async(end)
    connections.close_all()


@postgresql_only
async def test_after_postgresql_ends_every_session_messages_go_on_and_the_loop_takes_them_again(
    llm, sockets, conversation, alice, end_every_session
):
    llm.script(Reply(text="Hello there"), Reply(text="Still here"))
    socket = await sockets(conversation, alice)
    await loop_ready()
    ended = db.LOOP.wrapper.connection.info.backend_pid
    assert await socket.quiet()  # the socket's own reads, as it signed in, are over
    await end_every_session()

    await socket.send(HI)
    # A database thread takes this one, and waits while the pool replaces the connections the server ended.
    frames = await socket.receive_until(
        "run_finished", timeout=settings.DATABASES["default"]["OPTIONS"]["pool"]["timeout"]
    )
    assert frames[0]["type"] == "message" and frames[0]["message"]["content"] == "Hi"
    assert frames[-1]["status"] == "completed"

    await taken_on_the_loop_again(socket, conversation)
    assert db.LOOP.wrapper.connection.info.backend_pid != ended


@postgresql_only
async def test_a_postgresql_that_stops_answering_costs_the_event_loop_one_trip(
    llm, sockets, conversation, alice, monkeypatch
):
    llm.script(Reply(text="Hello there"), Reply(text="Still here"))
    socket = await sockets(conversation, alice)
    database = settings.DATABASES["default"]
    with TCPProxy((database["HOST"], int(database["PORT"]))) as proxy:
        through_proxy = loop_trip.PostgresConnection(db.THREADS)
        with monkeypatch.context() as patched:
            patched.setitem(connections.settings["default"], "PORT", proxy.port)
            through_proxy.take()  # made from the settings as they are now; opened by a database thread
        monkeypatch.setattr(db, "LOOP", through_proxy)
        try:
            await loop_ready(through_proxy)
            await started_while_the_database_threads_are_busy(socket, HI)
            assert (await socket.receive_until("run_finished"))[-1]["status"] == "completed"

            proxy.hang()
            await socket.send(AND_NOW)
            frames = await socket.receive_until("run_finished")
            assert frames[0]["type"] == "message" and frames[0]["message"]["content"] == "And now?"
            assert frames[-1]["status"] == "completed"
            assert not through_proxy.ready
        finally:
            proxy.restore()
            async with asyncio.timeout(10):
                while through_proxy._mending:
                    await asyncio.sleep(0.01)
            await sync_to_async(through_proxy.close)()
    assert await stored(conversation) == TWO_TURNS
