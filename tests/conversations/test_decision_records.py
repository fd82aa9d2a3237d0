"""A call that waited for its owner keeps the record of the decision: on its card in the chat page, and on its tool
message in the history API (which the page redraws from)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from django.test import Client
from django.utils import timezone

from conversations import services
from conversations.models import Conversation, Message, PendingConfirmation

pytestmark = pytest.mark.django_db

DECIDED_AT = datetime(2026, 11, 30, 18, 13, tzinfo=UTC)
ASKED = {"dashboard_id": 3, "environment": "production"}


def call(conversation: Conversation, call_id: str, *, status: str, result: str | None = "done", **fields):
    """A deploy_dashboard call, its confirmation as it was decided, and its result unless `result` is None."""
    Message.objects.create(
        conversation=conversation,
        role="assistant",
        tool_calls=[{"id": call_id, "name": "deploy_dashboard", "args": ASKED}],
    )
    confirmation = PendingConfirmation.objects.create(
        conversation=conversation,
        tool_call_id=call_id,
        tool_name="deploy_dashboard",
        args=ASKED,
        args_hash="x",
        status=status,
        expires_at=fields.pop("expires_at", timezone.now() + timedelta(hours=1)),
        **fields,
    )
    if result is not None:
        Message.objects.create(
            conversation=conversation,
            role="tool",
            tool_call_id=call_id,
            tool_name="deploy_dashboard",
            content="{}" if result == "done" else "not run",
            outcome=result,
        )
    return confirmation


@pytest.fixture
def decided(alice) -> Conversation:
    conversation = services.conversation_create(owner=alice, title="Deploys")
    Message.objects.create(conversation=conversation, role="user", content="Deploy dashboard 3")
    call(conversation, "c-approved", status="approved", decided_by=alice, decided_at=DECIDED_AT)
    call(
        conversation,
        "c-edited",
        status="edited",
        decided_by=alice,
        decided_at=DECIDED_AT,
        edited_args={"dashboard_id": 3, "environment": "staging"},
    )
    call(
        conversation,
        "c-rejected",
        status="rejected",
        result="rejected",
        decided_by=alice,
        decided_at=DECIDED_AT,
        reason="not <b>today</b>",
    )
    call(conversation, "c-silent", status="rejected", result="rejected", decided_by=alice, decided_at=DECIDED_AT)
    call(conversation, "c-superseded", status="superseded", result="cancelled", decided_at=DECIDED_AT)
    call(conversation, "c-lapsed", status="pending", result=None, expires_at=timezone.now() - timedelta(minutes=1))
    call(conversation, "c-waiting", status="pending", result=None)
    call(conversation, "c-running", status="approved", result=None, decided_by=alice, decided_at=DECIDED_AT)
    return conversation


def card(page: str, call_id: str) -> str:
    start = page.index(f'data-tool-call-id="{call_id}"')
    return page[start : page.index("</li>", start)]


def test_each_card_records_who_decided_when_and_with_which_arguments(alice, decided):
    client = Client()
    client.force_login(alice)
    page = client.get(f"/c/{decided.pk}/").content.decode()
    when = '<time class="decision-when" datetime="2026-11-30T18:13:00+00:00">'

    approved = card(page, "c-approved")
    assert 'data-state="ok"' in approved and 'data-decision="approved"' in approved
    assert 'Approved by <strong class="decision-who">alice</strong> at ' + when in approved
    assert "with these arguments:" in approved and "&quot;environment&quot;: &quot;production&quot;" in approved

    edited = card(page, "c-edited")
    assert "Edited by <strong" in edited and "to these arguments:" in edited
    record = edited[edited.index("tool-decision") :]
    assert "&quot;staging&quot;" in record.split("</div>")[0]  # the record shows what ran, the Input what was asked

    rejected = card(page, "c-rejected")
    assert 'data-state="rejected"' in rejected
    assert 'Rejected by <strong class="decision-who">alice</strong> at ' + when in rejected
    assert ': <q class="decision-reason">not &lt;b&gt;today&lt;/b&gt;</q>' in rejected
    assert "without a reason." in card(page, "c-silent")

    superseded = card(page, "c-superseded")
    assert 'data-state="cancelled"' in superseded and "Replaced by a new message before anyone decided" in superseded
    lapsed = card(page, "c-lapsed")
    assert 'data-state="cancelled"' in lapsed and "Expired before anyone decided" in lapsed

    waiting = card(page, "c-waiting")
    assert 'data-state="waiting"' in waiting and "tool-decision" not in waiting
    running = card(page, "c-running")
    assert 'data-state="running"' in running and 'data-decision="approved"' in running

    # The script's empty records, one per kind, from the same partial.
    templates = page[page.index('<template id="tpl-decisions">') :].split("</template>")[0]
    for variant in ["approved", "edited", "rejected", "rejected-reason", "superseded", "expired"]:
        assert f'data-decision="{variant}"' in templates
    assert 'data-username="alice"' in page


def test_the_records_are_in_russian_when_chosen(alice, decided):
    client = Client()
    client.force_login(alice)
    client.post("/i18n/setlang/", {"language": "ru", "next": "/"})
    page = client.get(f"/c/{decided.pk}/").content.decode()
    assert "Одобрено" in card(page, "c-approved") and "Отклонено" in card(page, "c-rejected")


def test_the_history_gives_each_tool_message_its_decision(alice_api, alice, decided):
    response = alice_api.get(f"/api/assistant/conversations/{decided.pk}/history/")
    tools = {
        message["tool_call_id"]: message["decision"]
        for message in response.json()["results"]
        if message["role"] == "tool"
    }

    assert tools["c-approved"] == {
        "status": "approved",
        "decided_by": "alice",
        "decided_at": "2026-11-30T18:13:00+00:00",
        "args": ASKED,
        "reason": "",
    }
    assert tools["c-edited"]["args"] == {"dashboard_id": 3, "environment": "staging"}
    assert (tools["c-rejected"]["status"], tools["c-rejected"]["reason"]) == ("rejected", "not <b>today</b>")
    assert (tools["c-superseded"]["status"], tools["c-superseded"]["decided_by"]) == ("superseded", None)
    others = [m for m in response.json()["results"] if m["role"] != "tool"]
    assert {message["decision"] for message in others} == {None}


def test_the_history_reads_the_decisions_once_per_page(alice_api, decided, django_assert_max_num_queries):
    with django_assert_max_num_queries(8):
        alice_api.get(f"/api/assistant/conversations/{decided.pk}/history/")
