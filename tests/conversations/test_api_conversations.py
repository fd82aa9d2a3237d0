from __future__ import annotations

import uuid

import pytest
from rest_framework.serializers import ModelSerializer

from conversations import selectors, services
from conversations.api.serializers import MessageSerializer
from conversations.models import Attachment, AuditEvent, Conversation

pytestmark = pytest.mark.django_db

LIST = "/api/assistant/conversations/"


def detail(conversation) -> str:
    return f"{LIST}{conversation.pk}/"


@pytest.fixture
def bobs(bob):
    conversation = services.conversation_create(owner=bob, title="Bob's secret plans")
    services.message_append(conversation=conversation, role="user", content="the plans", actor=bob)
    return conversation


def test_create_with_and_without_title(alice_api, alice):
    response = alice_api.post(LIST, {"title": "Quarterly review"}, format="json")
    assert response.status_code == 201
    body = response.json()
    assert set(body) == {
        "id",
        "title",
        "created_at",
        "updated_at",
        "message_count",
        "usage",
        "is_archived",
        "archived_at",
    }
    assert body["title"] == "Quarterly review" and body["message_count"] == 0 and body["is_archived"] is False
    assert Conversation.objects.get(pk=body["id"]).owner == alice

    untitled = alice_api.post(LIST, {}, format="json")
    assert untitled.status_code == 201 and untitled.json()["title"] == ""
    assert AuditEvent.objects.filter(kind="conversation_created", actor=alice).count() == 2


def test_create_rejects_a_title_that_is_too_long(alice_api):
    response = alice_api.post(LIST, {"title": "x" * 201}, format="json")
    assert response.status_code == 400
    body = response.json()
    assert body["code"] == "INVALID" and "title" in body["error"] and "title" in body["fields"]
    assert not Conversation.objects.exists()


def test_malformed_json_is_a_clear_400(alice_api):
    response = alice_api.post(LIST, data="{not json", content_type="application/json")
    assert response.status_code == 400
    assert response.json()["code"] == "INVALID"


def test_list_is_paginated_newest_first_with_counts(alice_api, alice):
    made = [services.conversation_create(owner=alice, title=f"conversation {i}") for i in range(25)]
    services.message_append(conversation=made[3], role="user", content="hello", actor=alice)

    first = alice_api.get(LIST).json()
    assert first["count"] == 25 and len(first["results"]) == 20 and first["next"]
    assert first["results"][0]["title"] == "conversation 3"
    assert first["results"][0]["message_count"] == 1

    second = alice_api.get(LIST, {"page": 2}).json()
    assert len(second["results"]) == 5 and second["next"] is None
    assert alice_api.get(LIST, {"page_size": 5}).json()["results"].__len__() == 5
    assert alice_api.get(LIST, {"page": 9}).status_code == 404


def test_list_search_on_title_and_archive_filter(alice_api, alice):
    report = services.conversation_create(owner=alice, title="Sales report for March")
    services.conversation_create(owner=alice, title="Deploy plans")
    archived = services.conversation_create(owner=alice, title="Old report")
    services.conversation_archive(conversation=archived, actor=alice)

    titles = [c["title"] for c in alice_api.get(LIST, {"search": "REPORT"}).json()["results"]]
    assert titles == ["Sales report for March"]

    archive = alice_api.get(LIST, {"archived": "true"}).json()["results"]
    assert [c["title"] for c in archive] == ["Old report"] and archive[0]["is_archived"] is True
    assert str(report.pk) not in {c["id"] for c in archive}
    assert alice_api.get(LIST, {"archived": "maybe"}).status_code == 400


def test_read_rename_archive_restore(alice_api, alice):
    conversation = services.conversation_create(owner=alice, title="first")

    assert alice_api.get(detail(conversation)).json()["title"] == "first"

    renamed = alice_api.patch(detail(conversation), {"title": "  second  "}, format="json")
    assert renamed.status_code == 200 and renamed.json()["title"] == "second"

    assert alice_api.delete(detail(conversation)).status_code == 204
    conversation.refresh_from_db()
    assert conversation.is_archived
    assert alice_api.get(LIST).json()["count"] == 0
    assert alice_api.get(detail(conversation)).json()["is_archived"] is True

    restored = alice_api.post(f"{detail(conversation)}restore/")
    assert restored.status_code == 200 and restored.json()["is_archived"] is False
    assert alice_api.get(LIST).json()["count"] == 1
    kinds = list(AuditEvent.objects.filter(conversation=conversation).values_list("kind", flat=True))
    assert {"conversation_renamed", "conversation_archived", "conversation_restored"} <= set(kinds)


@pytest.mark.parametrize("body", [{}, {"title": ""}, {"title": "x" * 201}, {"title": None}])
def test_rename_needs_a_title(alice_api, alice, body):
    conversation = services.conversation_create(owner=alice, title="keep me")
    response = alice_api.patch(detail(conversation), body, format="json")
    assert response.status_code == 400 and response.json()["code"] == "INVALID"
    conversation.refresh_from_db()
    assert conversation.title == "keep me"


def test_put_is_not_offered(alice_api, alice):
    conversation = services.conversation_create(owner=alice)
    response = alice_api.put(detail(conversation), {"title": "x"}, format="json")
    assert response.status_code == 405 and response.json()["code"] == "METHOD_NOT_ALLOWED"


def test_history_is_oldest_first_with_tool_calls_and_statuses(alice_api, alice):
    conversation = services.conversation_create(owner=alice)
    services.message_append(conversation=conversation, role="user", content="find 42", client_id="c1", actor=alice)
    services.message_append(
        conversation=conversation,
        role="assistant",
        content="",
        tool_calls=[{"id": "call_1", "name": "search_dashboards", "args": {"query": "42"}}],
    )
    services.message_append(
        conversation=conversation,
        role="tool",
        content='{"error": "boom"}',
        tool_call_id="call_1",
        tool_name="search_dashboards",
        is_error=True,
    )
    services.message_append(conversation=conversation, role="assistant", content="Partial", status="interrupted")

    response = alice_api.get(f"{detail(conversation)}history/")
    assert response.status_code == 200
    results = response.json()["results"]
    assert [m["role"] for m in results] == ["user", "assistant", "tool", "assistant"]
    assert results[0]["client_id"] == "c1" and results[0]["attachments"] == []
    assert results[1]["tool_calls"] == [{"id": "call_1", "name": "search_dashboards", "args": {"query": "42"}}]
    assert results[2]["tool_call_id"] == "call_1" and results[2]["is_error"] is True
    assert results[3]["status"] == "interrupted"


def test_history_keeps_superseded_messages_marked_unless_asked_for_the_live_branch(alice_api, alice):
    conversation = services.conversation_create(owner=alice)
    services.message_append(conversation=conversation, role="user", content="Which day?")
    services.message_append(conversation=conversation, role="assistant", content="Monday?", superseded=True)
    services.message_append(
        conversation=conversation,
        role="assistant",
        content="Tuesday.",
        usage={"prompt_tokens": 30, "completion_tokens": 3},
    )

    everything = alice_api.get(f"{detail(conversation)}history/").json()["results"]
    live = alice_api.get(f"{detail(conversation)}history/", {"include_superseded": "false"}).json()["results"]
    wrong = alice_api.get(f"{detail(conversation)}history/", {"include_superseded": "maybe"})

    assert [(m["content"], m["superseded"]) for m in everything] == [
        ("Which day?", False),
        ("Monday?", True),
        ("Tuesday.", False),
    ]
    assert [m["content"] for m in live] == ["Which day?", "Tuesday."]
    assert live[1]["usage"] == {"prompt_tokens": 30, "completion_tokens": 3} and live[0]["usage"] is None
    assert wrong.status_code == 400 and wrong.json()["code"] == "INVALID"


def test_a_conversation_shows_what_its_answers_cost(alice_api, alice):
    conversation = services.conversation_create(owner=alice)
    empty = services.conversation_create(owner=alice)
    services.message_append(conversation=conversation, role="user", content="Hi")
    for usage in (
        {"prompt_tokens": 120, "completion_tokens": 30},
        None,
        {"prompt_tokens": 200, "completion_tokens": 5},
    ):
        services.message_append(conversation=conversation, role="assistant", content="…", usage=usage)

    listed = {item["id"]: item["usage"] for item in alice_api.get(LIST).json()["results"]}
    one = alice_api.get(detail(conversation)).json()

    assert listed == {
        str(conversation.pk): {"prompt_tokens": 320, "completion_tokens": 35},
        str(empty.pk): {"prompt_tokens": 0, "completion_tokens": 0},
    }
    assert one["usage"] == {"prompt_tokens": 320, "completion_tokens": 35} and one["message_count"] == 1


def test_the_message_shape_is_the_declared_fields_as_drf_would_write_them(alice):
    conversation = services.conversation_create(owner=alice)
    attachment = Attachment.objects.create(
        conversation=conversation, owner=alice, original_name="r.csv", kind="csv", size=12, sha256="0" * 64
    )
    question, _ = services.message_append(conversation=conversation, role="user", content="Read it", client_id="q")
    question.attachments.set([attachment])
    services.message_append(
        conversation=conversation,
        role="assistant",
        content="**Bold** and `code`",
        tool_calls=[{"id": "c1", "name": "read", "args": {"n": 1}}],
        usage={"prompt_tokens": 5, "completion_tokens": 2},
        superseded=True,
    )
    services.message_append(
        conversation=conversation, role="tool", content="{}", tool_call_id="c1", tool_name="read", outcome="done"
    )

    for message in selectors.history_for(conversation):
        serializer = MessageSerializer(message)
        assert serializer.data == ModelSerializer.to_representation(serializer, message)


def test_history_is_paginated(alice_api, alice):
    conversation = services.conversation_create(owner=alice)
    for i in range(130):
        services.message_append(conversation=conversation, role="user", content=f"message {i}")
    first = alice_api.get(f"{detail(conversation)}history/").json()
    assert first["count"] == 130 and len(first["results"]) == 100
    assert first["results"][0]["content"] == "message 0"
    second = alice_api.get(f"{detail(conversation)}history/", {"page": 2}).json()
    assert [m["content"] for m in second["results"]][-1] == "message 129"


@pytest.mark.parametrize(
    ("method", "suffix", "body"),
    [
        ("get", "", None),
        ("patch", "", {"title": "mine now"}),
        ("delete", "", None),
        ("post", "restore/", None),
        ("get", "history/", None),
    ],
)
def test_another_users_conversation_is_a_404_and_stays_untouched(alice_api, bobs, method, suffix, body):
    response = getattr(alice_api, method)(f"{detail(bobs)}{suffix}", body, format="json")
    assert response.status_code == 404
    assert response.json() == {"error": "Not found.", "code": "NOT_FOUND"}
    bobs.refresh_from_db()
    assert bobs.title == "Bob's secret plans" and not bobs.is_archived


def test_alice_never_lists_bobs_conversations(alice_api, bobs):
    assert alice_api.get(LIST).json()["count"] == 0
    assert alice_api.get(LIST, {"archived": "true"}).json()["count"] == 0
    assert alice_api.get(LIST, {"search": "secret"}).json()["count"] == 0


def test_unknown_or_malformed_ids_are_404(alice_api):
    assert alice_api.get(f"{LIST}{uuid.uuid4()}/").status_code == 404
    response = alice_api.get(f"{LIST}not-a-uuid/")
    assert response.status_code == 404 and response.json()["code"] == "NOT_FOUND"


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("get", LIST),
        ("post", LIST),
        ("get", f"{LIST}{uuid.UUID(int=1)}/"),
        ("get", f"{LIST}{uuid.UUID(int=1)}/history/"),
        ("get", f"/api/agent/conversations/{uuid.UUID(int=1)}/active"),
    ],
)
def test_anonymous_requests_get_401(anon_api, method, path):
    response = getattr(anon_api, method)(path)
    assert response.status_code == 401
    assert response.json()["code"] == "AUTH_REQUIRED"


def test_session_signed_in_user_can_use_the_api_with_csrf(client, alice):
    client.force_login(alice)
    assert client.get(LIST).status_code == 200

    from django.test import Client

    strict = Client(enforce_csrf_checks=True)
    strict.force_login(alice)
    refused = strict.post(LIST, {}, content_type="application/json")
    assert refused.status_code == 403 and refused.json()["code"] == "FORBIDDEN"
    assert not Conversation.objects.exists()
