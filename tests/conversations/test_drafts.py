"""The start page's drafts: a conversation that holds the files attached before the first message, listed nowhere
until that message begins it, and discarded with its files when nobody does."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client
from django.utils import timezone

from conversations import services
from conversations.models import Attachment, AuditEvent, Conversation

pytestmark = pytest.mark.django_db

CSV = b"region,revenue\nNorth,42\n"


@pytest.fixture(autouse=True)
def media(settings, tmp_path):
    settings.MEDIA_ROOT = tmp_path / "media"
    return settings.MEDIA_ROOT


@pytest.fixture
def alice_client(alice) -> Client:
    client = Client()
    client.force_login(alice)
    return client


def draft_with_file(client: Client, name: str = "numbers.csv") -> tuple[Conversation, str]:
    """A draft made as the start page makes it, with one file uploaded to it; the draft and the file's id."""
    made = client.post("/c/new/draft/")
    assert made.status_code == 201
    body = made.json()
    assert body["upload_url"] == f"/api/assistant/conversations/{body['id']}/attachments/"
    uploaded = client.post(body["upload_url"], {"file": SimpleUploadedFile(name, CSV)})
    assert uploaded.status_code == 201, uploaded.content
    return Conversation.objects.get(pk=body["id"]), uploaded.json()["id"]


def first_files(page: str) -> list[dict]:
    return json.loads(page.split('<script id="first-files" type="application/json">')[1].split("</script>")[0])


def test_a_draft_is_listed_nowhere_and_opens_nowhere(alice, alice_client, alice_api):
    draft, _ = draft_with_file(alice_client)
    assert draft.is_draft and draft.owner == alice
    audit = AuditEvent.objects.get(kind=AuditEvent.Kind.CONVERSATION_CREATED, conversation=draft)
    assert audit.data == {"title": "", "draft": True}

    assert 'id="start"' in alice_client.get("/").content.decode()  # still someone with no conversation
    assert alice_client.get(f"/c/{draft.pk}/").status_code == 404
    assert alice_api.get("/api/assistant/conversations/").json()["results"] == []
    assert alice_api.get(f"/api/assistant/conversations/{draft.pk}/").status_code == 404
    # Its files, though, are there for the message that will begin it.
    assert [
        item["original_name"]
        for item in alice_api.get(f"/api/assistant/conversations/{draft.pk}/attachments/").json()["results"]
    ] == ["numbers.csv"]


def test_the_first_message_begins_the_draft_with_the_files_still_attached(alice, alice_client):
    draft, kept = draft_with_file(alice_client)
    _, removed = draft_with_file(alice_client, "other.csv")  # another tab's draft: not this message's
    response = alice_client.post(
        "/c/new/", {"content": "What do these numbers say?", "draft": draft.pk, "attachments": [kept, removed, "x"]}
    )
    assert response["Location"] == f"/c/{draft.pk}/"
    draft.refresh_from_db()
    assert not draft.is_draft

    chat = alice_client.get(response["Location"]).content.decode()
    assert 'data-send-first="1"' in chat
    assert first_files(chat) == [{"id": kept, "name": "numbers.csv", "kind": "csv", "size": len(CSV)}]
    assert first_files(alice_client.get(response["Location"]).content.decode()) == []  # only the first time
    listed = alice_client.get("/").content.decode()
    assert listed.count(f'href="/c/{draft.pk}/"') == 1


def test_a_draft_that_is_gone_leaves_the_message_without_its_files(alice, bob, alice_client):
    bobs = services.conversation_draft(owner=bob)
    for missing in [bobs.pk, "00000000-0000-0000-0000-000000000000"]:
        response = alice_client.post("/c/new/", {"content": "Hello", "draft": missing}, follow=True)
        page = response.content.decode()
        assert "The files attached on the start page could not go with this message: attach them again." in page
        assert first_files(page) == []
    bobs.refresh_from_db()
    assert bobs.is_draft  # someone else's draft is not anyone's to begin
    assert Conversation.objects.filter(owner=alice, is_draft=False).count() == 2


def test_drafts_nobody_began_for_a_day_are_discarded_with_their_files(
    alice, alice_client, media, django_capture_on_commit_callbacks
):
    old, _ = draft_with_file(alice_client)
    begun, _ = draft_with_file(alice_client, "begun.csv")
    services.conversation_begin(conversation=begun)
    day_ago = timezone.now() - timedelta(days=1, minutes=1)
    Conversation.objects.filter(pk__in=[old.pk, begun.pk]).update(created_at=day_ago)
    stored = [path for path in media.rglob("*") if path.is_file()]
    assert len(stored) == 4  # each file, and what was read of it

    with django_capture_on_commit_callbacks(execute=True):
        fresh, _ = draft_with_file(alice_client, "fresh.csv")
    assert set(Conversation.objects.values_list("pk", flat=True)) == {begun.pk, fresh.pk}
    assert sorted(Attachment.objects.values_list("original_name", flat=True)) == ["begun.csv", "fresh.csv"]
    assert len([path for path in media.rglob("*") if path.is_file()]) == 4  # the old draft's two went
    # What happened stays in the audit log.
    assert AuditEvent.objects.filter(kind=AuditEvent.Kind.ATTACHMENT_UPLOADED, data__name="numbers.csv").exists()
