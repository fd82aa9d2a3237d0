"""The PostgreSQL backend's pool and prepared statements, against the test run's own server: a connection the server
ended is never lent, and a running server's prepared statements outlive a migration that adds a column."""

from __future__ import annotations

import time

import psycopg
import pytest
from django.conf import settings
from django.db import connection

from conversations import selectors, services
from conversations.models import Message

pytestmark = [
    pytest.mark.skipif(connection.vendor != "postgresql", reason="PostgreSQL's own pool and prepared statements"),
    pytest.mark.django_db(transaction=True),
]


def other_connection() -> psycopg.Connection:
    database = settings.DATABASES["default"]
    return psycopg.connect(
        host=database["HOST"], port=database["PORT"], user=database["USER"], dbname=database["NAME"], autocommit=True
    )


def backend_pid() -> int:
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        [(pid,)] = cursor.fetchall()
    return pid


def test_a_pooled_connection_that_the_server_ended_is_not_lent_again():
    ended = backend_pid()
    connection.close()  # back to the pool, idle
    with other_connection() as other:
        other.execute("SELECT pg_terminate_backend(%s)", [ended])
        for _ in range(500):  # until the session is gone, as after a restart
            if not other.execute("SELECT 1 FROM pg_stat_activity WHERE pid = %s", [ended]).fetchall():
                break
            time.sleep(0.01)

    lent = []
    for _ in range(2 * settings.DATABASES["default"]["OPTIONS"]["pool"]["max_size"]):
        lent.append(backend_pid())  # fails on a broken connection
        connection.close()
    assert ended not in lent


def test_prepared_statements_outlive_a_column_added_by_a_migration(alice):
    conversation = services.conversation_create(owner=alice)
    services.message_append(conversation=conversation, role=Message.Role.USER, content="Hello", actor=alice)
    for _ in range(6):  # past the prepare threshold: the history's statement is prepared on this connection
        assert [entry["content"] for entry in selectors.provider_history(conversation)] == ["Hello"]
    with other_connection() as other:
        other.execute("ALTER TABLE conversations_message ADD COLUMN added_by_a_migration integer")
        try:
            assert [entry["content"] for entry in selectors.provider_history(conversation)] == ["Hello"]
        finally:
            other.execute("ALTER TABLE conversations_message DROP COLUMN added_by_a_migration")
