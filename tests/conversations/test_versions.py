"""Earlier versions: what a regenerate or an edit replaced says where its branch stood, and the chat page shows it,
read-only, behind "Previous versions" just before what replaced it."""

from __future__ import annotations

import importlib
import re

import pytest
from django.apps import apps
from django.test import Client

from conversations import services
from conversations.models import AuditEvent, Message
from conversations.services.turns import Turn, turn_take

pytestmark = pytest.mark.django_db

backfill = importlib.import_module("conversations.migrations.0010_message_replaced")


@pytest.fixture
def conversation(alice):
    return services.conversation_create(owner=alice, title="Versions")


def say(conversation, role: str, content: str, **fields) -> Message:
    return services.message_append(conversation=conversation, role=role, content=content, **fields)[0]


def replaced(message: Message) -> dict | None:
    message.refresh_from_db()
    return message.metadata.get("replaced")


def regenerate(conversation, user) -> None:
    turn_take(conversation=conversation, user=user, turn=Turn("regenerate", client_id=None))


def edit(conversation, user, message: Message, content: str) -> Message:
    return turn_take(conversation=conversation, user=user, turn=Turn("edit", content, message_id=message.pk)).message


def chat_page(user, conversation) -> str:
    client = Client()
    client.force_login(user)
    return client.get(f"/c/{conversation.pk}/").content.decode()


def versions_block(page: str) -> str:
    """The page's messages, without the empty partials the script draws from."""
    return page.split('id="messages"', 1)[1].split("</ol>\n    </div>", 1)[0]


def test_a_regenerate_marks_what_it_replaced_as_following_the_question(conversation, alice):
    question = say(conversation, "user", "Capital of France?")
    call = say(conversation, "assistant", "", tool_calls=[{"id": "c1", "name": "lookup", "args": {}}])
    result = say(conversation, "tool", "{}", tool_call_id="c1", tool_name="lookup")
    answer = say(conversation, "assistant", "Paris, probably.")

    regenerate(conversation, alice)

    mark = {"after": question.pk, "branch": call.pk}
    assert [replaced(message) for message in (call, result, answer)] == [mark, mark, mark]
    assert replaced(question) is None


def test_an_edit_marks_the_question_and_what_followed_as_following_the_message_before(conversation, alice):
    first = say(conversation, "user", "Hello")
    hello = say(conversation, "assistant", "Hi.")
    question = say(conversation, "user", "Deploy dashboard 7")
    answer = say(conversation, "assistant", "Deploying 7.")

    new = edit(conversation, alice, question, "Deploy dashboard 8")
    mark = {"after": hello.pk, "branch": question.pk}
    assert (replaced(question), replaced(answer), replaced(new)) == (mark, mark, None)

    edit(conversation, alice, first, "Good morning")
    mark = {"after": None, "branch": first.pk}
    assert (replaced(first), replaced(hello), replaced(new)) == (mark, mark, mark)
    # What an earlier edit replaced keeps its place inside the version it was replaced in.
    assert replaced(question) == {"after": hello.pk, "branch": question.pk}


def test_the_chat_page_shows_earlier_answers_behind_previous_versions(conversation, alice):
    say(conversation, "user", "Capital of France?")
    say(conversation, "assistant", "Paris, **probably**. <script>alert(1)</script>")
    regenerate(conversation, alice)
    say(conversation, "assistant", "Lyon?")
    regenerate(conversation, alice)
    live = say(conversation, "assistant", "The capital of France is Paris.")

    rows = versions_block(chat_page(alice, conversation))

    assert "Previous versions (2)" in rows
    assert rows.index("Capital of France?") < rows.index("Previous versions (2)") < rows.index("Version 1 of 3")
    assert rows.index("Version 1 of 3") < rows.index("<strong>probably</strong>") < rows.index("Version 2 of 3")
    assert rows.index("Version 2 of 3") < rows.index("Lyon?") < rows.index(f'data-message-id="{live.pk}"')
    assert "<script>" not in rows and "&lt;script&gt;" in rows
    assert "<details>" in rows and "<details open" not in rows


def test_an_edited_question_shows_the_old_branch_with_its_own_earlier_answers(conversation, alice):
    say(conversation, "user", "Deploy dashboard 7")
    say(conversation, "assistant", "Deploying seven.")
    regenerate(conversation, alice)
    say(conversation, "assistant", "Deploying 7.")
    question = Message.objects.get(content="Deploy dashboard 7")
    new = edit(conversation, alice, question, "Deploy dashboard 8")
    say(conversation, "assistant", "Deploying 8.")

    rows = versions_block(chat_page(alice, conversation))

    outer = rows.index("Previous version (1)")
    assert (
        outer
        < rows.index("Version 1 of 2")
        < rows.index("Deploy dashboard 7")
        < rows.index("Previous version (1)", outer + 1)
    )
    assert rows.index("Deploying seven.") < rows.index("Deploying 7.") < rows.index(f'data-message-id="{new.pk}"')
    assert rows.count('class="versions"') == 2
    # An earlier version is read-only: only the live question has Edit.
    assert rows.count('data-action="edit"') == 1
    assert re.search(rf'data-message-id="{new.pk}"[^<]*>(.|\n)*?data-action="edit"', rows)


def test_the_migration_marks_what_was_replaced_before_from_the_audit_log(conversation, alice):
    # As stored before the marks: superseded rows, and the audit events of the regenerate and the edit.
    question = say(conversation, "user", "Deploy dashboard 7")
    old = say(conversation, "assistant", "Deploying seven.", superseded=True)
    kept = say(conversation, "assistant", "Deploying 7.", superseded=True)
    new = say(conversation, "user", "Deploy dashboard 8")
    Message.objects.filter(pk=question.pk).update(superseded=True)
    answer = say(conversation, "assistant", "Deploying 8.")
    audit = AuditEvent.objects.create
    audit(
        conversation=conversation,
        kind="answer_regenerated",
        data={"message_id": question.pk, "replaced": [old.pk]},
    )
    audit(conversation=conversation, kind="message_edited", data={"message_id": new.pk, "replaces": question.pk})

    backfill.mark_replaced(apps, None)

    assert replaced(old) == {"after": question.pk, "branch": old.pk}
    edited = {"after": None, "branch": question.pk}
    assert (replaced(question), replaced(kept)) == (edited, edited)
    assert (replaced(new), replaced(answer)) == (None, None)
