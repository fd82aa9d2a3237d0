"""What taking a message in costs the database: everything before the provider is asked happens in one trip
(runs.db.accept_turn), and these tests hold its size, which the benchmark shows as time to first token; and what
its text so far and its end cost, on the same database thread."""

from __future__ import annotations

import uuid
from datetime import datetime

import pytest
from django.db import DataError, connection, transaction
from django.forms.models import model_to_dict
from django.utils import timezone
from psycopg import pq

from conversations import services, sql
from conversations.api.serializers import MessageSerializer
from conversations.exceptions import AccessRefused, Busy, RateLimited
from conversations.models import AuditEvent, Conversation, Message, TokenUsage
from conversations.ratelimit import SharedWindow
from conversations.runs import db
from conversations.services.messages import FLUSH_BATCH
from tools.registry import registry

accept_turn = db.accept_turn.func
# The user and their permissions (2), the conversation with what the client_id stored, whether there are files
# and whether decisions wait to be settled (1), and the history (1); then the gate with the title, the message and
# the answer's row, and their audit rows: one statement on PostgreSQL, a transaction of five on SQLite (with BEGIN
# and COMMIT).
MOST_STATEMENTS = 5 if connection.vendor == "postgresql" else 9
HELLO = services.Turn("message", "Hello", "c-1", metadata={"context": {}})


@pytest.fixture
def limiter() -> SharedWindow:
    return SharedWindow("intake-test", 100, seconds=60)


def test_a_new_message_is_taken_in_with_a_bounded_number_of_statements(alice, limiter, django_assert_max_num_queries):
    conversation = services.conversation_create(owner=alice)
    permissions = frozenset(alice.get_all_permissions())

    with django_assert_max_num_queries(MOST_STATEMENTS):
        accepted = accept_turn(conversation, (alice, None, permissions), HELLO, db.Admission(limiter), registry)

    assert accepted.echo is None and accepted.run_id is not None
    [make_echo] = accepted.frames
    with django_assert_max_num_queries(0):  # made on the event loop, once the provider has been asked
        echo = make_echo()
    assert echo["message"]["content"] == "Hello" and echo["message"]["files"] == [] and echo["client_id"] == "c-1"
    history, tools, _, context = accepted.begun.inputs
    assert history == [{"role": "user", "content": "Hello"}] and context == {}
    assert [tool.name for tool in tools] == [tool.name for tool in registry.permitted(alice)]

    # What it stored: the gate with the run, the title, the message and the answer's row, and what happened.
    conversation.refresh_from_db()
    assert conversation.active_run_id == accepted.run_id and conversation.title == "Hello"
    question, answer = conversation.messages.order_by("id")
    assert (question.role, question.content, question.client_id, question.metadata) == (
        "user",
        "Hello",
        "c-1",
        {"context": {}},
    )
    assert echo["message"]["id"] == question.pk and accepted.begun.message_id == answer.pk
    assert (answer.role, answer.status, answer.metadata) == ("assistant", "streaming", {"run_id": str(accepted.run_id)})
    audit = list(
        AuditEvent.objects.filter(conversation=conversation)
        .exclude(kind="conversation_created")
        .order_by("id")
        .values("kind", "actor", "data")
    )
    assert audit == [
        {
            "kind": "message_sent",
            "actor": alice.pk,
            "data": {"message_id": question.pk, "client_id": "c-1", "length": 5},
        },
        {"kind": "run_started", "actor": alice.pk, "data": {"run_id": str(accepted.run_id)}},
    ]


@pytest.mark.skipif(connection.vendor != "postgresql", reason="pipelines are PostgreSQL's")
def test_a_new_messages_reads_reach_postgresql_together_before_its_one_write(alice, client, limiter):
    client.force_login(alice)
    permissions = frozenset(alice.get_all_permissions())
    seen = []

    def pipelined(execute, sql, params, many, context):
        seen.append((sql.split()[0], context["connection"].connection.pgconn.pipeline_status == pq.PipelineStatus.ON))
        return execute(sql, params, many, context)

    for session_key in (None, client.session.session_key):  # a socket signed in by a token, then by a session
        seen.clear()
        conversation = services.conversation_create(owner=alice)
        with connection.execute_wrapper(pipelined):
            accept_turn(conversation, (alice, session_key, permissions), HELLO, db.Admission(limiter), registry)

        # The user, their permissions, the session, the conversation's state and its history: one answer of the
        # server for all of them.
        reads = 4 if session_key is None else 5
        assert seen == [("SELECT", True)] * reads + [("WITH", False)]


def test_a_run_that_ended_between_a_messages_reads_and_its_gate_leaves_it_to_the_general_way(alice, limiter):
    conversation = services.conversation_create(owner=alice)
    access = (alice, None, frozenset(alice.get_all_permissions()))
    reads = sql.Reads()
    fresh = services.state_read(reads, conversation, HELLO, alice.pk)
    reads.send()
    # Meanwhile, another socket's message is taken in, and its run ends.
    other = accept_turn(
        conversation,
        access,
        services.Turn("message", "First", "c-0", metadata={"context": {}}),
        db.Admission(limiter),
        registry,
    )
    services.conversation_run_release(conversation=conversation, run_id=other.run_id)

    taken = services.message_intake(
        conversation=conversation, user=alice, turn=HELLO, admit=lambda: None, fresh=fresh()
    )

    # What was read with the state (the history) no longer holds: nothing is stored, and the gate stays free.
    assert taken is None
    conversation.refresh_from_db()
    assert conversation.active_run_id is None
    assert list(conversation.messages.filter(role="user").values_list("content", flat=True)) == ["First"]


def test_a_message_over_the_rate_limit_stores_nothing_and_leaves_the_gate_open(alice):
    conversation = services.conversation_create(owner=alice)
    access = (alice, None, frozenset(alice.get_all_permissions()))
    spent = SharedWindow("intake-test-spent", 1, seconds=60)
    spent.allow(alice.pk)

    with pytest.raises(RateLimited):
        accept_turn(conversation, access, HELLO, db.Admission(spent), registry)

    conversation.refresh_from_db()
    assert conversation.active_run_id is None and conversation.title == ""
    assert not conversation.messages.exists()
    assert not AuditEvent.objects.filter(conversation=conversation, kind__in=["message_sent", "run_started"]).exists()


def test_a_message_to_a_conversation_whose_gate_is_held_is_refused_and_counted_once(alice):
    conversation = services.conversation_create(owner=alice)
    access = (alice, None, frozenset(alice.get_all_permissions()))
    first = accept_turn(
        conversation, access, HELLO, db.Admission(SharedWindow("intake-test-once", 100, seconds=60)), registry
    )
    two = SharedWindow(f"intake-test-{uuid.uuid4()}", 2, seconds=60)  # a window of its own, on a shared Redis too
    # The short way tries the gate (on PostgreSQL, after counting the message) and leaves it to the general way,
    # which finds the run going on.
    with pytest.raises(Busy):
        accept_turn(conversation, access, services.Turn("message", "Again", "c-2"), db.Admission(two), registry)

    assert two.allow(alice.pk) and not two.allow(alice.pk)
    conversation.refresh_from_db()
    assert conversation.active_run_id == first.run_id
    assert list(conversation.messages.values_list("role", "content")) == [("user", "Hello"), ("assistant", "")]
    assert AuditEvent.objects.filter(conversation=conversation, kind="message_sent").count() == 1


@pytest.mark.skipif(connection.vendor != "postgresql", reason="SQLite does not hold a value to its column's length")
def test_a_client_id_longer_than_its_column_is_refused_not_cut_short(alice, limiter):
    conversation = services.conversation_create(owner=alice)
    access = (alice, None, frozenset(alice.get_all_permissions()))
    long = services.Turn("message", "Hello", "c" * 65, metadata={"context": {}})

    with pytest.raises(DataError), transaction.atomic():
        accept_turn(conversation, access, long, db.Admission(limiter), registry)

    assert not conversation.messages.exists()


def test_a_message_seen_before_is_echoed_and_nothing_is_stored_again(alice, limiter):
    conversation = services.conversation_create(owner=alice)
    access = (alice, None, frozenset(alice.get_all_permissions()))
    first = accept_turn(conversation, access, HELLO, db.Admission(limiter), registry)
    services.conversation_run_release(conversation=conversation, run_id=first.run_id)

    again = accept_turn(conversation, access, HELLO, db.Admission(limiter), registry)

    assert again.run_id is None and again.echo["message"]["id"] == first.frames[-1]()["message"]["id"]
    assert conversation.messages.filter(role="user").count() == 1


def test_a_user_whose_permissions_changed_is_refused_before_anything_is_stored(alice, limiter):
    conversation = services.conversation_create(owner=alice)

    with pytest.raises(AccessRefused) as refused:
        accept_turn(
            conversation,
            (alice, None, frozenset({"dashboards.deploy"})),
            services.Turn("message", "Hi"),
            db.Admission(limiter),
            registry,
        )

    assert refused.value.refusal == "permissions"
    assert not conversation.messages.exists()


def test_an_answer_ends_with_its_write_and_one_read(alice, limiter, django_assert_num_queries):
    conversation = services.conversation_create(owner=alice)
    access = (alice, None, frozenset(alice.get_all_permissions()))
    accepted = accept_turn(conversation, access, HELLO, db.Admission(limiter), registry)

    with django_assert_num_queries(1):  # the answer's final write, returning the answer as stored, for its frame
        frame = db.save_message.func(accepted.begun.message_id, "**Hi** there.", "complete")

    shown = frame["message"]
    assert (shown["id"], shown["content"], shown["status"]) == (accepted.begun.message_id, "**Hi** there.", "complete")
    assert shown["files"] == [] and shown["attachments"] == [] and "<strong>Hi</strong>" in shown["html"]
    stored = Message.objects.get(pk=accepted.begun.message_id)
    assert (stored.content, stored.status, stored.usage) == ("**Hi** there.", "complete", None)
    # What was not given is kept: the run's id, no calls.
    assert stored.metadata == {"run_id": str(accepted.run_id)} and stored.tool_calls == []
    assert shown["created_at"] == MessageSerializer(stored).data["created_at"]


def test_usage_is_stored_with_the_answer_and_added_to_the_owners_day(alice, django_assert_num_queries):
    conversation = services.conversation_create(owner=alice)
    first = services.assistant_message_start(conversation=conversation, run_id="run-1")
    calls = [{"id": "call_1", "name": "lookup", "args": {"q": "x"}}]

    with django_assert_num_queries(2):  # the answer's write, and the day's row made or added to
        saved = services.assistant_message_save(
            message_id=first.pk,
            content="",
            status="complete",
            tool_calls=calls,
            usage={"prompt_tokens": 300, "completion_tokens": 20},
            metadata={"run_id": "run-1", "stop": "step_limit"},
        )
    second = services.assistant_message_start(conversation=conversation, run_id="run-2")
    services.assistant_message_save(
        message_id=second.pk, content="Found.", status="complete", usage={"prompt_tokens": 40, "completion_tokens": 5}
    )

    stored = Message.objects.get(pk=first.pk)
    assert stored.tool_calls == saved.tool_calls == calls
    assert stored.usage == saved.usage == {"prompt_tokens": 300, "completion_tokens": 20}
    assert stored.metadata == {"run_id": "run-1", "stop": "step_limit"}
    today = TokenUsage.objects.get(user=alice, day=timezone.localdate())
    assert (today.prompt_tokens, today.completion_tokens, today.answers) == (340, 25, 2)


def test_an_answer_that_is_gone_is_not_saved_nor_counted(alice):
    conversation = services.conversation_create(owner=alice)
    answer = services.assistant_message_start(conversation=conversation, run_id="run-1")
    conversation.delete()

    with pytest.raises(Message.DoesNotExist):
        services.assistant_message_save(
            message_id=answer.pk, content="Done.", status="complete", usage={"prompt_tokens": 9, "completion_tokens": 1}
        )
    assert not TokenUsage.objects.exists()


def test_rows_inserted_in_sql_are_stored_as_the_orm_stores_them(alice):
    conversation = services.conversation_create(owner=alice)

    def two(client_id: str) -> list[Message]:
        return [
            Message(conversation=conversation, role="user", content="Привет", client_id=client_id, metadata={"a": [1]}),
            Message(conversation=conversation, role="assistant", status="streaming", tool_calls=[{"id": "c"}]),
        ]

    by_orm, in_sql = two("orm"), two("sql")
    Message.objects.bulk_create(by_orm)
    sql.insert(in_sql)

    assert all(message.pk for message in in_sql) and not any(message._state.adding for message in in_sql)
    ignored = {"id", "client_id", "created_at"}
    stored = {
        message.pk: {key: value for key, value in model_to_dict(message).items() if key not in ignored}
        for message in Message.objects.filter(pk__in=[message.pk for message in by_orm + in_sql])
    }
    assert [stored[message.pk] for message in in_sql] == [stored[message.pk] for message in by_orm]
    assert [m.client_id for m in Message.objects.filter(pk__in=[m.pk for m in in_sql]).order_by("pk")] == ["sql", None]
    assert all(message.created_at is not None for message in in_sql)


def test_rows_read_in_sql_are_the_instances_raw_makes(alice):
    conversation = services.conversation_create(owner=alice)
    Message.objects.create(conversation=conversation, role="user", content="Привет", metadata={"k": [1, None]})
    Message.objects.create(conversation=conversation, role="assistant", tool_calls=[{"id": "c", "args": {}}])
    # Columns in another order than the model's, one of them missing (deferred), and one that is no field.
    query = (
        'SELECT "metadata", "id", "created_at", "tool_calls", "superseded", "role", 7 AS "extra" '
        'FROM "conversations_message" WHERE "conversation_id" = %s ORDER BY "id"'
    )
    params = [sql.param(Conversation, "id", conversation.pk)]

    by_raw, in_sql = list(Message.objects.raw(query, params)), sql.rows(Message, query, params)

    def seen(message: Message) -> tuple:
        loaded = {
            field.attname: getattr(message, field.attname)
            for field in Message._meta.concrete_fields
            if field.attname in message.__dict__
        }
        return loaded, message.extra, message.get_deferred_fields()

    assert [seen(message) for message in in_sql] == [seen(message) for message in by_raw]
    assert isinstance(in_sql[0].created_at, datetime) and in_sql[0].superseded is False
    assert in_sql[0].metadata == {"k": [1, None]} and in_sql[1].tool_calls == [{"id": "c", "args": {}}]
    assert "content" in in_sql[0].get_deferred_fields() and in_sql[0].content == "Привет"  # loaded when asked for


def test_a_flush_writes_every_streaming_answers_text_in_one_statement_and_never_over_a_final_write(
    alice, django_assert_num_queries
):
    conversation = services.conversation_create(owner=alice)
    streaming = [services.assistant_message_start(conversation=conversation, run_id=f"run-{n}") for n in range(3)]
    ended = services.assistant_message_start(conversation=conversation, run_id="run-ended")
    services.assistant_message_save(message_id=ended.pk, content="Final.", status="complete")
    texts = {answer.pk: f"So far {n}, «ёж» 'quoted'" for n, answer in enumerate([*streaming, ended])}

    with django_assert_num_queries(1):
        services.assistant_messages_flush(texts=texts)

    stored = dict(Message.objects.filter(conversation=conversation).values_list("pk", "content"))
    assert stored == {**{answer.pk: texts[answer.pk] for answer in streaming}, ended.pk: "Final."}


def test_a_flush_of_more_answers_than_one_statement_takes_goes_in_batches(alice, django_assert_num_queries):
    conversation = services.conversation_create(owner=alice)
    answers = Message.objects.bulk_create(
        Message(conversation=conversation, role="assistant", status="streaming") for _ in range(FLUSH_BATCH + 1)
    )

    with django_assert_num_queries(2):
        services.assistant_messages_flush(texts={answer.pk: f"text {answer.pk}" for answer in answers})

    assert all(content == f"text {pk}" for pk, content in Message.objects.values_list("pk", "content"))
