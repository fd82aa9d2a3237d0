from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from agentchat.agent.calls import ToolOutcome
from conversations import selectors, services
from conversations.models import AuditEvent, Conversation, Message, PendingConfirmation, ToolJob

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize(
    ("text", "title"),
    [
        ("Hello there", "Hello there"),
        ("  spaces\n and\tnewlines  ", "spaces and newlines"),
        (
            "Show me every dashboard with validation problems and then tell me which ones to fix first",
            "Show me every dashboard with validation problems and then",
        ),
        ("x" * 80, "x" * 60),
        ("a" * 59 + " bcdef", "a" * 59),
        ("word " * 12 + "end", ("word " * 12).strip()),
        (
            "Покажи дашборды с проблемами валидации и расскажи, что с ними делать дальше",
            "Покажи дашборды с проблемами валидации и расскажи, что с",
        ),
        ("x" * 57 + ", and then some more words", "x" * 57),
    ],
)
def test_title_is_the_first_message_cut_at_sixty_on_a_word_boundary(text, title):
    assert services.title_from_text(text) == title


def test_first_user_message_titles_the_conversation(alice):
    conversation = services.conversation_create(owner=alice)
    services.message_append(conversation=conversation, role="user", content="Deploy dashboard 42 to production now")
    services.message_append(conversation=conversation, role="user", content="Something else entirely")
    conversation.refresh_from_db()
    assert conversation.title == "Deploy dashboard 42 to production now"


def test_explicit_title_is_kept(alice):
    conversation = services.conversation_create(owner=alice, title="Quarterly review")
    services.message_append(conversation=conversation, role="user", content="Hello")
    conversation.refresh_from_db()
    assert conversation.title == "Quarterly review"


def test_client_id_stores_a_message_once_per_conversation(alice):
    conversation = services.conversation_create(owner=alice)
    first, created = services.message_append(conversation=conversation, role="user", content="hi", client_id="c-1")
    again, created_again = services.message_append(
        conversation=conversation, role="user", content="hi", client_id="c-1"
    )
    assert created and not created_again
    assert again.pk == first.pk
    assert conversation.messages.count() == 1
    assert AuditEvent.objects.filter(kind="message_sent", conversation=conversation).count() == 1


def test_same_client_id_in_another_conversation_is_another_message(alice):
    one = services.conversation_create(owner=alice)
    two = services.conversation_create(owner=alice)
    services.message_append(conversation=one, role="user", content="hi", client_id="c-1")
    _, created = services.message_append(conversation=two, role="user", content="hi", client_id="c-1")
    assert created
    assert Message.objects.filter(client_id="c-1").count() == 2


def test_messages_without_client_id_never_collide(alice):
    conversation = services.conversation_create(owner=alice)
    for _ in range(3):
        services.message_append(conversation=conversation, role="assistant", content="ok")
    assert conversation.messages.count() == 3


def test_database_refuses_a_duplicate_client_id(alice):
    from django.db import IntegrityError, transaction

    conversation = services.conversation_create(owner=alice)
    Message.objects.create(conversation=conversation, role="user", content="a", client_id="dup")
    with pytest.raises(IntegrityError), transaction.atomic():
        Message.objects.create(conversation=conversation, role="user", content="b", client_id="dup")


def _pending(conversation, tool_call_id="call-1"):
    return PendingConfirmation.objects.create(
        conversation=conversation,
        tool_call_id=tool_call_id,
        tool_name="deploy_dashboard",
        args={"dashboard_id": 42},
        args_hash="x",
        expires_at=timezone.now() + timedelta(hours=1),
    )


def test_archive_clears_pending_confirmations_and_keeps_every_row(alice):
    conversation = services.conversation_create(owner=alice)
    services.message_append(conversation=conversation, role="user", content="deploy 42")
    pending = _pending(conversation)
    decided = _pending(conversation, "call-2")
    decided.status = PendingConfirmation.Status.APPROVED
    decided.save()

    services.conversation_archive(conversation=conversation, actor=alice)

    conversation.refresh_from_db()
    pending.refresh_from_db()
    decided.refresh_from_db()
    assert conversation.is_archived and conversation.archived_at is not None
    assert pending.status == PendingConfirmation.Status.EXPIRED
    assert decided.status == PendingConfirmation.Status.APPROVED
    assert conversation.messages.count() == 1
    assert not selectors.conversations_for(alice).exists()
    assert list(selectors.conversations_for(alice, archived=True)) == [conversation]
    event = AuditEvent.objects.get(kind="conversation_archived")
    assert event.actor == alice and event.data["confirmations_cleared"] == 1


def test_restore_brings_it_back_to_the_active_list(alice):
    conversation = services.conversation_create(owner=alice)
    services.conversation_archive(conversation=conversation, actor=alice)
    services.conversation_restore(conversation=conversation, actor=alice)
    conversation.refresh_from_db()
    assert not conversation.is_archived and conversation.archived_at is None
    assert list(selectors.conversations_for(alice)) == [conversation]
    assert AuditEvent.objects.filter(kind="conversation_restored", actor=alice).count() == 1


def test_run_gate_is_taken_once_and_released(alice):
    conversation = services.conversation_create(owner=alice)
    run_id = services.conversation_run_claim(conversation=conversation)
    assert run_id is not None
    assert services.conversation_run_claim(conversation=conversation) is None

    conversation.refresh_from_db()
    active = selectors.conversation_active_run(conversation)
    assert active["active"] and active["run_id"] == run_id

    services.conversation_run_release(conversation=conversation, run_id=run_id)
    conversation.refresh_from_db()
    assert selectors.conversation_active_run(conversation) == {"active": False, "run_id": None, "since": None}
    assert services.conversation_run_claim(conversation=conversation) is not None


def test_a_lapsed_heartbeat_frees_the_gate(alice, settings):
    conversation = services.conversation_create(owner=alice)
    dead_run = services.conversation_run_claim(conversation=conversation)
    Conversation.objects.filter(pk=conversation.pk).update(
        active_run_heartbeat=timezone.now() - settings.RUN_HEARTBEAT_TIMEOUT - timedelta(seconds=1)
    )
    conversation.refresh_from_db()
    assert not selectors.conversation_active_run(conversation)["active"]

    new_run = services.conversation_run_claim(conversation=conversation)
    assert new_run not in (None, dead_run)
    assert not services.conversation_run_heartbeat(conversation=conversation, run_id=dead_run)
    assert services.conversation_run_heartbeat(conversation=conversation, run_id=new_run)
    services.conversation_run_release(conversation=conversation, run_id=dead_run)
    conversation.refresh_from_db()
    assert conversation.active_run_id == new_run


def test_conversations_are_listed_newest_first_with_message_counts(alice, bob):
    old = services.conversation_create(owner=alice, title="old")
    new = services.conversation_create(owner=alice, title="new")
    services.conversation_create(owner=bob, title="bob's")
    services.message_append(conversation=old, role="user", content="one")
    services.message_append(conversation=old, role="assistant", content="two")
    listed = list(selectors.conversations_for(alice))
    assert listed == [old, new]
    assert listed[0].message_count == 1 and listed[1].message_count == 0  # questions: the answer is not one


def test_failed_sign_in_is_audited(client, alice):
    response = client.post("/accounts/login/", {"username": "alice", "password": "wrong"})
    assert response.status_code == 200
    event = AuditEvent.objects.get(kind="auth_failed")
    assert event.data == {"username": "alice", "path": "/accounts/login/"}
    assert "wrong" not in str(event.data)


def test_a_background_call_ends_stored_as_every_database_takes_it(alice):
    """A service may answer, or fail, with what no database stores: NUL, or half a UTF-16 pair."""
    conversation = services.conversation_create(owner=alice)
    done, failed = (
        ToolJob.objects.create(
            conversation=conversation,
            user=alice,
            run_id="8d1f0d8e-6d25-4c44-9d4b-0a8f1fb1f0b1",
            tool_call_id=call_id,
            tool_name="compile_report",
            status=ToolJob.Status.RUNNING,
        )
        for call_id in ("call_done", "call_failed")
    )

    services.tool_job_finish(job_id=done.pk, attempt=1, outcome=ToolOutcome.done({"te\x00xt": "half \ud800"}))
    services.tool_job_finish(job_id=failed.pk, attempt=1, outcome=ToolOutcome.failed("it said \udfff\x00"))

    done.refresh_from_db()
    failed.refresh_from_db()
    assert (done.status, done.output) == (ToolJob.Status.SUCCEEDED, {"text": "half \ufffd"})
    assert (failed.status, failed.error) == (ToolJob.Status.FAILED, "it said \ufffd")
