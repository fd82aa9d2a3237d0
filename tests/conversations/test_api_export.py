"""GET /api/assistant/conversations/{id}/export/: Markdown to read, JSON with every stored field; the owner only."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
from django.utils import timezone

from conversations import services
from conversations.models import Message, PendingConfirmation

pytestmark = pytest.mark.django_db


def export(client, conversation, fmt: str | None = None):
    query = f"?format={fmt}" if fmt else ""
    return client.get(f"/api/assistant/conversations/{conversation.pk}/export/{query}")


@pytest.fixture
def deployed(alice):
    conversation = services.conversation_create(owner=alice, title="Deploy the sales board")
    add = Message.objects.create
    add(conversation=conversation, role="user", content="Deploy dashboard 3 to staging")
    add(
        conversation=conversation,
        role="assistant",
        content="",
        tool_calls=[{"id": "c1", "name": "deploy_dashboard", "args": {"dashboard_id": 3, "environment": "staging"}}],
    )
    add(
        conversation=conversation,
        role="tool",
        tool_call_id="c1",
        tool_name="deploy_dashboard",
        content="```done``` deployed",
        outcome="done",
    )
    add(conversation=conversation, role="assistant", content="Deployed, I think.", superseded=True)
    add(
        conversation=conversation,
        role="assistant",
        content="Deployed **dashboard 3**.",
        usage={"prompt_tokens": 210, "completion_tokens": 6},
    )
    add(conversation=conversation, role="user", content="And production?")
    add(conversation=conversation, role="assistant", status="failed", error="The model provider could not be reached.")
    PendingConfirmation.objects.create(
        conversation=conversation,
        tool_call_id="c1",
        tool_name="deploy_dashboard",
        args={"dashboard_id": 3, "environment": "production"},
        edited_args={"dashboard_id": 3, "environment": "staging"},
        args_hash="x",
        status=PendingConfirmation.Status.EDITED,
        decided_by=alice,
        decided_at=timezone.now(),
        reason="staging first",
        expires_at=timezone.now() + timedelta(hours=1),
    )
    return conversation


def test_markdown_reads_as_the_conversation_went(alice_api, deployed):
    response = export(alice_api, deployed, "md")

    assert response.status_code == 200
    assert response["Content-Type"] == "text/markdown; charset=utf-8"
    assert response["Content-Disposition"] == f'attachment; filename="conversation-{deployed.pk}.md"'
    text = response.content.decode()
    assert text.startswith("# Deploy the sales board\n")
    assert "**You** · " in text and "Deploy dashboard 3 to staging" in text
    assert 'Calls `deploy_dashboard`:\n\n```json\n{\n  "dashboard_id": 3,' in text
    assert "> Edited by alice at " in text and '"environment": "staging"' in text and "Reason: staging first" in text
    # A result holding backticks cannot close its block early.
    assert "`deploy_dashboard` (done):\n\n````\n```done``` deployed\n````" in text
    assert "Deployed **dashboard 3**." in text
    assert " · replaced by a later version\n\nDeployed, I think." in text
    assert "_Failed: The model provider could not be reached._" in text
    assert text.index("Deploy dashboard 3 to staging") < text.index("Deployed") < text.index("And production?")


def test_markdown_is_the_default(alice_api, deployed):
    response = export(alice_api, deployed)

    assert response.status_code == 200 and response["Content-Type"].startswith("text/markdown")


def test_json_keeps_every_stored_field(alice_api, deployed):
    response = export(alice_api, deployed, "json")

    assert response.status_code == 200 and response["Content-Type"] == "application/json"
    body = json.loads(response.content)
    assert body["conversation"]["id"] == str(deployed.pk) and body["conversation"]["title"] == deployed.title
    stored = list(deployed.messages.order_by("created_at", "id"))
    assert [message["id"] for message in body["messages"]] == [message.pk for message in stored]
    fields = ("role", "content", "tool_calls", "tool_call_id", "tool_name", "outcome", "status", "error")
    for field in (*fields, "superseded", "usage"):
        assert [message[field] for message in body["messages"]] == [getattr(m, field) for m in stored], field
    [decision] = body["confirmations"]
    assert (
        decision["status"] == "edited" and decision["decided_by"] == "alice" and decision["reason"] == "staging first"
    )
    assert decision["args"]["environment"] == "production" and decision["edited_args"]["environment"] == "staging"


def test_only_the_owner_exports(bob_api, deployed):
    for fmt in ("md", "json"):
        response = export(bob_api, deployed, fmt)
        assert response.status_code == 404
        assert json.loads(response.content)["code"] == "NOT_FOUND"
        assert "sales board" not in response.content.decode()


def test_an_unknown_format_is_not_found(alice_api, deployed):
    assert export(alice_api, deployed, "pdf").status_code == 404


def test_each_decision_says_who_when_and_what_ran(alice_api, alice, deployed):
    def decided(call_id: str, status: str, **fields):
        Message.objects.create(
            conversation=deployed,
            role="assistant",
            tool_calls=[{"id": call_id, "name": "deploy_dashboard", "args": {"dashboard_id": 4}}],
        )
        PendingConfirmation.objects.create(
            conversation=deployed,
            tool_call_id=call_id,
            tool_name="deploy_dashboard",
            args={"dashboard_id": 4},
            args_hash="x",
            status=status,
            expires_at=timezone.now() + timedelta(hours=1),
            **fields,
        )

    decided("c2", "approved", decided_by=alice, decided_at=timezone.now())
    decided("c3", "rejected", decided_by=alice, decided_at=timezone.now(), reason="not today")
    decided("c4", "rejected", decided_by=alice, decided_at=timezone.now())
    decided("c5", "superseded", decided_at=timezone.now())
    decided("c6", "expired", decided_at=timezone.now(), reason="The conversation was archived.")

    text = export(alice_api, deployed, "md").content.decode()

    assert "> Approved by alice at " in text and ', with the arguments `{"dashboard_id": 4}`.' in text
    assert ": not today" in text and "> Rejected by alice at " in text and ", without a reason." in text
    assert "> Replaced by a new message before anyone decided: not run." in text
    assert "> Expired before anyone decided: not run. The conversation was archived." in text
    assert "Superseded by" not in text and "by nobody" not in text


def test_json_gives_each_tool_message_its_decision(alice_api, deployed):
    body = json.loads(export(alice_api, deployed, "json").content)

    [tool] = [message for message in body["messages"] if message["role"] == "tool"]
    assert tool["decision"]["status"] == "edited" and tool["decision"]["decided_by"] == "alice"
    assert tool["decision"]["args"] == {"dashboard_id": 3, "environment": "staging"}
    assert {message["decision"] for message in body["messages"] if message["role"] != "tool"} == {None}


def test_markdown_is_written_in_the_readers_language_and_what_was_said_stays_as_said(alice_api, deployed):
    text = alice_api.get(
        f"/api/assistant/conversations/{deployed.pk}/export/?format=md", HTTP_ACCEPT_LANGUAGE="ru"
    ).content.decode()

    assert "**Вы** · " in text and "Deploy dashboard 3 to staging" in text
    assert "Вызывает `deploy_dashboard`:" in text
    assert "> Изменено пользователем alice " in text and "Причина: staging first" in text
    assert "_Ошибка: Не удалось связаться с провайдером модели._" in text
    assert "Calls" not in text and "Failed" not in text
