from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone
from django.utils.dateparse import parse_datetime

from conversations import services
from conversations.models import Conversation

pytestmark = pytest.mark.django_db


def active_url(conversation) -> str:
    return f"/api/agent/conversations/{conversation.pk}/active"


def test_idle_conversation_is_not_active(alice_api, alice):
    conversation = services.conversation_create(owner=alice)
    response = alice_api.get(active_url(conversation))
    assert response.status_code == 200
    assert response.json() == {"active": False, "run_id": None, "since": None}


def test_a_claimed_run_is_reported_until_released(alice_api, alice):
    conversation = services.conversation_create(owner=alice)
    run_id = services.conversation_run_claim(conversation=conversation)

    body = alice_api.get(active_url(conversation)).json()
    assert body["active"] is True and body["run_id"] == str(run_id)
    assert abs(parse_datetime(body["since"]) - timezone.now()) < timedelta(minutes=1)

    services.conversation_run_release(conversation=conversation, run_id=run_id)
    assert alice_api.get(active_url(conversation)).json()["active"] is False


def test_a_run_whose_heartbeat_lapsed_is_not_active(alice_api, alice, settings):
    conversation = services.conversation_create(owner=alice)
    services.conversation_run_claim(conversation=conversation)
    Conversation.objects.filter(pk=conversation.pk).update(
        active_run_heartbeat=timezone.now() - settings.RUN_HEARTBEAT_TIMEOUT - timedelta(seconds=5)
    )
    assert alice_api.get(active_url(conversation)).json()["active"] is False


def test_someone_elses_conversation_is_404(bob_api, alice):
    conversation = services.conversation_create(owner=alice)
    services.conversation_run_claim(conversation=conversation)
    response = bob_api.get(active_url(conversation))
    assert response.status_code == 404 and response.json()["code"] == "NOT_FOUND"
