"""Django admin (docs/pages.md): conversations, confirmations, attachments and the read-only audit log."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

from conversations import services
from conversations.models import Attachment, AuditEvent, Conversation, Message, PendingConfirmation

pytestmark = pytest.mark.django_db

CHANGELISTS = [
    "admin:conversations_conversation_changelist",
    "admin:conversations_pendingconfirmation_changelist",
    "admin:conversations_attachment_changelist",
    "admin:conversations_auditevent_changelist",
]


def add_confirmation(conversation: Conversation, tool_call_id: str = "call_1") -> PendingConfirmation:
    return PendingConfirmation.objects.create(
        conversation=conversation,
        tool_call_id=tool_call_id,
        tool_name="delete_file",
        args={"path": "reports/old.txt"},
        args_hash="0" * 64,
        expires_at=timezone.now() + timedelta(minutes=10),
    )


@pytest.fixture
def rows(alice, bob):
    """A bit of everything the admin lists, made the way the product makes it."""
    conversation = services.conversation_create(owner=alice)
    services.message_append(
        conversation=conversation, role=Message.Role.USER, content="Please tidy the reports folder", actor=alice
    )
    services.message_append(
        conversation=conversation,
        role=Message.Role.ASSISTANT,
        content="I will delete the old report.",
        tool_calls=[{"id": "call_1", "name": "delete_file", "args": {"path": "reports/old.txt"}}],
    )
    confirmation = add_confirmation(conversation)
    attachment = Attachment.objects.create(
        conversation=conversation,
        owner=alice,
        file="attachments/2025/01/report.pdf",
        original_name="report.pdf",
        kind=Attachment.Kind.PDF,
        size=1234,
        sha256="a" * 64,
        parse_status=Attachment.ParseStatus.PARSED,
    )
    bobs = services.conversation_create(owner=bob, title="Bob's questions")
    services.conversation_archive(conversation=bobs, actor=bob)
    return {"conversation": conversation, "confirmation": confirmation, "attachment": attachment, "bobs": bobs}


def shown(response) -> list:
    """The rows the change list page displays."""
    return list(response.context["cl"].result_list)


# --- who gets in -------------------------------------------------------------------------------


@pytest.mark.parametrize("url_name", CHANGELISTS)
def test_superuser_sees_each_change_list(client, admin_user, rows, url_name):
    client.force_login(admin_user)

    response = client.get(reverse(url_name))

    assert response.status_code == 200
    assert len(shown(response)) >= 1


def test_change_lists_show_the_rows(client, admin_user, rows):
    client.force_login(admin_user)

    conversations = client.get(reverse("admin:conversations_conversation_changelist"))
    confirmations = client.get(reverse("admin:conversations_pendingconfirmation_changelist"))
    attachments = client.get(reverse("admin:conversations_attachment_changelist"))

    assert {c.pk for c in shown(conversations)} == {rows["conversation"].pk, rows["bobs"].pk}
    counts = {c.pk: c.message_total for c in shown(conversations)}
    assert counts == {rows["conversation"].pk: 2, rows["bobs"].pk: 0}
    assert "Please tidy the reports folder" in conversations.content.decode()
    assert [c.pk for c in shown(confirmations)] == [rows["confirmation"].pk]
    assert "delete_file" in confirmations.content.decode()
    assert [a.pk for a in shown(attachments)] == [rows["attachment"].pk]
    assert "report.pdf" in attachments.content.decode()


def test_token_usage_is_totalled_per_user_and_day(client, admin_user, alice, rows):
    for usage in ({"prompt_tokens": 900, "completion_tokens": 40}, {"prompt_tokens": 100, "completion_tokens": 2}):
        answer = services.assistant_message_start(conversation=rows["conversation"], run_id="r")
        services.assistant_message_save(message_id=answer.pk, content="Done.", status="complete", usage=usage)
    client.force_login(admin_user)

    response = client.get(reverse("admin:conversations_tokenusage_changelist"))

    [today] = shown(response)
    assert (today.user, today.day, today.prompt_tokens, today.completion_tokens) == (
        alice,
        timezone.localdate(),
        1000,
        42,
    )
    assert (today.total, today.answers) == (1042, 2)
    assert "1042" in response.content.decode()


def test_archived_filter(client, admin_user, rows):
    client.force_login(admin_user)
    url = reverse("admin:conversations_conversation_changelist")

    archived = client.get(url, {"is_archived__exact": "1"})
    active = client.get(url, {"is_archived__exact": "0"})

    assert archived.status_code == active.status_code == 200
    assert [c.pk for c in shown(archived)] == [rows["bobs"].pk]
    assert [c.pk for c in shown(active)] == [rows["conversation"].pk]


def test_conversation_change_page_shows_its_messages(client, admin_user, rows):
    client.force_login(admin_user)

    response = client.get(reverse("admin:conversations_conversation_change", args=[rows["conversation"].pk]))

    assert response.status_code == 200
    page = response.content.decode()
    assert "Please tidy the reports folder" in page
    assert "I will delete the old report." in page


def admin_pages(rows, alice) -> list[str]:
    audit = reverse("admin:conversations_auditevent_changelist")
    return [
        *(reverse(name) for name in CHANGELISTS),
        reverse("admin:conversations_conversation_change", args=[rows["conversation"].pk]),
        f"{audit}?kind__exact=conversation_created",
        f"{audit}?actor__id__exact={alice.pk}",
        f"{audit}?created_at__year={timezone.now().year}",
    ]


def test_normal_user_is_sent_to_the_admin_login(client, alice, rows):
    client.force_login(alice)

    for url in admin_pages(rows, alice):
        response = client.get(url)
        assert response.status_code == 302, url
        assert response.url.startswith(reverse("admin:login")), url


def test_anonymous_visitor_is_sent_to_the_admin_login(client, alice, rows):
    for url in admin_pages(rows, alice):
        response = client.get(url)
        assert response.status_code == 302, url
        assert response.url.startswith(reverse("admin:login")), url


# --- the audit log: filters --------------------------------------------------------------------


def test_audit_log_filtered_by_kind(client, admin_user, rows):
    client.force_login(admin_user)

    url = reverse("admin:conversations_auditevent_changelist")
    response = client.get(url, {"kind__exact": "conversation_archived"})

    assert response.status_code == 200
    events = shown(response)
    assert [(e.kind, e.conversation_id) for e in events] == [("conversation_archived", rows["bobs"].pk)]


def test_audit_log_filtered_by_actor(client, admin_user, alice, bob, rows):
    client.force_login(admin_user)

    response = client.get(reverse("admin:conversations_auditevent_changelist"), {"actor__id__exact": alice.pk})

    assert response.status_code == 200
    events = shown(response)
    assert {e.kind for e in events} == {"conversation_created", "message_sent"}
    assert {e.actor_id for e in events} == {alice.pk}
    assert AuditEvent.objects.filter(actor=bob).exists()


def test_audit_log_filtered_by_date(client, admin_user, rows):
    old = services.audit_record(kind=AuditEvent.Kind.AUTH_FAILED, data={"username": "mallory"})
    AuditEvent.objects.filter(pk=old.pk).update(created_at=datetime(2020, 3, 1, 12, 0, tzinfo=UTC))
    client.force_login(admin_user)
    url = reverse("admin:conversations_auditevent_changelist")
    # What the "Today" link of the date filter sends: the start of the day, with its time zone.
    today = timezone.localtime().replace(hour=0, minute=0, second=0, microsecond=0)

    in_2020 = client.get(url, {"created_at__year": "2020"})
    march_2020 = client.get(url, {"created_at__year": "2020", "created_at__month": "3", "created_at__day": "1"})
    since_today = client.get(url, {"created_at__gte": str(today)})

    assert in_2020.status_code == march_2020.status_code == since_today.status_code == 200
    assert [e.pk for e in shown(in_2020)] == [old.pk]
    assert [e.pk for e in shown(march_2020)] == [old.pk]
    recent = {e.pk for e in shown(since_today)}
    assert old.pk not in recent
    assert recent == set(AuditEvent.objects.exclude(pk=old.pk).values_list("pk", flat=True))


# --- the audit log: read-only ------------------------------------------------------------------


def test_audit_log_has_no_add_page(client, admin_user, rows):
    client.force_login(admin_user)

    assert client.get(reverse("admin:conversations_auditevent_add")).status_code == 403
    changelist = client.get(reverse("admin:conversations_auditevent_changelist"))
    assert reverse("admin:conversations_auditevent_add") not in changelist.content.decode()


def test_audit_event_cannot_be_changed_or_deleted(client, admin_user, rows):
    event = AuditEvent.objects.filter(kind=AuditEvent.Kind.CONVERSATION_CREATED).first()
    client.force_login(admin_user)
    change_url = reverse("admin:conversations_auditevent_change", args=[event.pk])
    delete_url = reverse("admin:conversations_auditevent_delete", args=[event.pk])

    page = client.get(change_url)
    assert page.status_code == 200
    assert 'name="_save"' not in page.content.decode()
    assert delete_url not in page.content.decode()

    assert client.post(change_url, {"kind": "auth_failed", "data": "{}"}).status_code == 403
    assert client.get(delete_url).status_code == 403
    assert client.post(delete_url, {"post": "yes"}).status_code == 403

    event.refresh_from_db()
    assert event.kind == AuditEvent.Kind.CONVERSATION_CREATED


def test_audit_log_bulk_delete_is_not_offered(client, admin_user, rows):
    client.force_login(admin_user)
    url = reverse("admin:conversations_auditevent_changelist")
    before = AuditEvent.objects.count()
    ids = list(AuditEvent.objects.values_list("pk", flat=True))

    response = client.post(url, {"action": "delete_selected", "_selected_action": ids, "index": 0, "post": "yes"})

    assert AuditEvent.objects.count() == before
    assert response.status_code in {200, 302}


# --- archive / restore actions -----------------------------------------------------------------


def run_action(client, action: str, *conversations: Conversation):
    return client.post(
        reverse("admin:conversations_conversation_changelist"),
        {"action": action, "_selected_action": [str(c.pk) for c in conversations], "index": 0},
        follow=True,
    )


def test_archive_action_archives_and_expires_pending_confirmations(client, admin_user, rows):
    conversation = rows["conversation"]
    client.force_login(admin_user)

    response = run_action(client, "archive", conversation)

    assert response.status_code == 200
    assert "1 conversation archived." in response.content.decode()
    conversation.refresh_from_db()
    assert conversation.is_archived is True
    assert conversation.archived_at is not None
    rows["confirmation"].refresh_from_db()
    assert rows["confirmation"].status == PendingConfirmation.Status.EXPIRED
    # Nothing was deleted.
    assert conversation.messages.count() == 2
    assert PendingConfirmation.objects.filter(conversation=conversation).count() == 1
    event = AuditEvent.objects.filter(kind=AuditEvent.Kind.CONVERSATION_ARCHIVED, conversation=conversation).get()
    assert event.actor == admin_user


def test_restore_action_restores(client, admin_user, rows):
    bobs = rows["bobs"]
    client.force_login(admin_user)

    response = run_action(client, "restore", bobs)

    assert response.status_code == 200
    assert "1 conversation restored." in response.content.decode()
    bobs.refresh_from_db()
    assert bobs.is_archived is False
    assert bobs.archived_at is None
    event = AuditEvent.objects.filter(kind=AuditEvent.Kind.CONVERSATION_RESTORED, conversation=bobs).get()
    assert event.actor == admin_user


def test_archive_then_restore_several(client, admin_user, rows):
    first, second = rows["conversation"], rows["bobs"]
    client.force_login(admin_user)

    run_action(client, "archive", first, second)
    assert set(Conversation.objects.values_list("is_archived", flat=True)) == {True}

    response = run_action(client, "restore", first, second)
    assert "2 conversations restored." in response.content.decode()
    assert set(Conversation.objects.values_list("is_archived", flat=True)) == {False}


def test_renaming_in_the_admin_is_audited(client, admin_user, rows):
    conversation = rows["conversation"]
    client.force_login(admin_user)
    url = reverse("admin:conversations_conversation_change", args=[conversation.pk])
    response = client.post(url, {"title": "Tidy-up", "messages-TOTAL_FORMS": "2", "messages-INITIAL_FORMS": "2"})
    assert response.status_code == 302
    conversation.refresh_from_db()
    assert conversation.title == "Tidy-up"
    event = AuditEvent.objects.get(kind=AuditEvent.Kind.CONVERSATION_RENAMED)
    assert event.actor == admin_user and event.data["to"] == "Tidy-up"


def test_normal_user_cannot_run_the_archive_action(client, alice, rows):
    client.force_login(alice)

    response = client.post(
        reverse("admin:conversations_conversation_changelist"),
        {"action": "archive", "_selected_action": [str(rows["conversation"].pk)], "index": 0},
    )

    assert response.status_code == 302
    assert response.url.startswith(reverse("admin:login"))
    rows["conversation"].refresh_from_db()
    assert rows["conversation"].is_archived is False


# --- readouts ------------------------------------------------------------------------------------


def test_confirmations_are_listed_as_such_waiting_ones_first(client, admin_user, alice, rows):
    conversation = rows["conversation"]
    decided = add_confirmation(conversation, "call_2")
    PendingConfirmation.objects.filter(pk=decided.pk).update(
        status="edited", decided_by=alice, decided_at=timezone.now(), edited_args={"path": "reports/older.txt"}
    )
    client.force_login(admin_user)
    url = reverse("admin:conversations_pendingconfirmation_changelist")

    waiting = client.get(url)
    page = waiting.content.decode()
    assert [c.pk for c in shown(waiting)] == [rows["confirmation"].pk]
    assert "1 confirmation" in page and "pending confirmation" not in page.lower()
    assert "Waiting until " in page

    everything = client.get(url, {"status": "all"})
    assert {c.pk for c in shown(everything)} == {rows["confirmation"].pk, decided.pk}
    edited = client.get(url, {"status": "edited"})
    page = edited.content.decode()
    assert [c.pk for c in shown(edited)] == [decided.pk]
    assert "Edited by alice at " in page
    assert (
        "{&quot;path&quot;: &quot;reports/old.txt&quot;}, edited to {&quot;path&quot;: &quot;reports/older.txt&quot;}"
        in page
    )


def test_a_conversation_page_shows_its_latest_messages_and_links_to_all(client, admin_user, rows):
    conversation = rows["conversation"]
    for n in range(30):
        services.message_append(conversation=conversation, role=Message.Role.USER, content=f"question {n}")
    services.message_append(
        conversation=conversation,
        role=Message.Role.TOOL,
        content="Error: rejected by the user.",
        tool_call_id="call_1",
        tool_name="delete_file",
        outcome="rejected",
        is_error=True,
    )
    client.force_login(admin_user)

    page = client.get(reverse("admin:conversations_conversation_change", args=[conversation.pk])).content.decode()

    assert "question 29" in page and "question 11" in page and "question 10 " not in page
    assert "I will delete the old report." not in page
    assert "Latest messages" in page
    # Only a tool message has an outcome; the others have no icon at all (the two left say the conversation is
    # neither archived nor a draft).
    assert page.count('icon-no.svg" alt="">') == 1 and "delete_file · rejected" in page
    assert page.count("icon-no.svg") == 3 and "icon-yes.svg" not in page
    everything = f"{reverse('admin:conversations_message_changelist')}?conversation__id__exact={conversation.pk}"
    assert f'<a href="{everything}">33 messages, oldest first</a>' in page.replace("&amp;", "&")

    listed = client.get(everything)
    assert listed.status_code == 200
    assert listed.context["cl"].result_count == 33
    assert "I will delete the old report." in listed.content.decode()


def test_the_audit_log_says_what_happened(client, admin_user, alice, rows):
    services.confirmation_decide(
        confirmation=rows["confirmation"], decision="edit", actor=alice, args={"path": "reports/older.txt"}
    )
    client.force_login(admin_user)

    response = client.get(reverse("admin:conversations_auditevent_changelist"), {"kind__exact": "confirmation_decided"})

    page = response.content.decode()
    assert (
        '<td class="field-what"><code>delete_file</code> · {&quot;path&quot;: &quot;reports/old.txt&quot;} → '
        "{&quot;path&quot;: &quot;reports/older.txt&quot;} · decision: edit</td>"
    ) in page
    assert '<td class="field-actor nowrap">alice</td>' in page


def test_the_admin_pages_carry_the_accessibility_fixes(client, admin_user):
    """Django's admin with the project's fixes on top (docs/pages.md#admin): a date and a time each have a label."""
    client.force_login(admin_user)

    page = client.get(reverse("admin:auth_user_change", args=[admin_user.pk])).content.decode()

    assert '<link rel="stylesheet" href="/static/css/admin.css">' in page
    assert '<script src="/static/js/admin.js" defer></script>' in page
    assert '<label for="id_date_joined_0">Date:</label> <input type="text" name="date_joined_0"' in page
    assert '<label for="id_date_joined_1">Time:</label> <input type="text" name="date_joined_1"' in page
