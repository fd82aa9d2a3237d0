"""A new message's trip to the database, on SQLite in one process: the event loop takes it itself, so a busy
database thread does not hold it up; when another writer holds the database, the database thread takes it."""

from __future__ import annotations

import asyncio
import sqlite3
import threading

import pytest
from asgiref.sync import sync_to_async
from django.conf import settings

from conversations.models import Message
from conversations.runs import db
from tests.fake_provider import Reply

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(not db.ON_THE_LOOP, reason="with PostgreSQL or Redis the database threads take every trip"),
]

HI = {"type": "message", "content": "Hi", "client_id": "c1"}


async def stored(conversation) -> list[tuple[str, str]]:
    rows = Message.objects.filter(conversation=conversation).order_by("id").values_list("role", "content")
    return await sync_to_async(list)(rows)


async def test_a_message_is_taken_and_its_run_started_while_the_database_thread_is_busy(
    llm, sockets, conversation, alice
):
    llm.script(Reply(text="Hello there"))
    socket = await sockets(conversation, alice)
    free = threading.Event()
    busy = [db.THREADS.submit(free.wait, 10) for _ in range(settings.DATABASE_THREADS)]
    try:
        await socket.send(HI)
        opening = await socket.receive_until("run_started")
        assert not any(work.done() for work in busy)
    finally:
        free.set()
    echo = opening[0]
    assert echo["type"] == "message" and echo["message"]["content"] == "Hi" and echo["client_id"] == "c1"
    finished = (await socket.receive_until("run_finished"))[-1]
    assert finished["status"] == "completed"
    assert await stored(conversation) == [("user", "Hi"), ("assistant", "Hello there")]


async def test_a_message_waits_in_the_database_thread_while_another_writer_holds_the_database(
    llm, sockets, conversation, alice
):
    llm.script(Reply(text="Hello there"))
    socket = await sockets(conversation, alice)
    other = sqlite3.connect(settings.DATABASES["default"]["NAME"], isolation_level=None)
    other.execute("BEGIN IMMEDIATE")
    # Committed by this event loop: had the message's trip waited on the loop for the lock, nothing would commit.
    asyncio.get_running_loop().call_later(0.5, other.execute, "COMMIT")
    try:
        await socket.send(HI)
        frames = await socket.receive_until("run_finished")
    finally:
        other.close()
    assert frames[0]["type"] == "message" and frames[0]["message"]["content"] == "Hi"
    assert frames[-1]["status"] == "completed"
    llm.script(Reply(text="Still here"))
    await socket.send({**HI, "content": "And now?", "client_id": "c2"})
    assert (await socket.receive_until("run_finished"))[-1]["status"] == "completed"
    assert await stored(conversation) == [
        ("user", "Hi"),
        ("assistant", "Hello there"),
        ("user", "And now?"),
        ("assistant", "Still here"),
    ]
