"""The admin as a superuser reads it: a long conversation's page stays short, confirmations and the audit log say
what happened."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
from django.contrib.auth import get_user_model
from django.test import Client
from django.utils import timezone
from playwright.sync_api import expect

from conversations import services
from conversations.models import Message, PendingConfirmation

from .conftest import screenshot

LONG_OUTPUT = json.dumps({"rows": [{"id": n, "title": f"Dashboard {n}", "owner": "Ivanova"} for n in range(40)]})


@pytest.fixture
def admin_page(context, server, transactional_db):
    root = get_user_model().objects.create_superuser("root", "root@example.com", "root-browser-password")
    client = Client()
    client.force_login(root)
    context.add_cookies([{"name": "sessionid", "value": client.cookies["sessionid"].value, "url": server.http_url}])
    return context.new_page()


def long_conversation(owner):
    conversation = services.conversation_create(owner=owner, title="A long afternoon of deploys")
    for n in range(60):
        services.message_append(conversation=conversation, role="user", content=f"Question {n}: deploy dashboard {n}?")
        services.message_append(
            conversation=conversation,
            role="assistant",
            tool_calls=[{"id": f"c{n}", "name": "deploy_dashboard", "args": {"dashboard_id": n}}],
        )
        services.message_append(
            conversation=conversation,
            role="tool",
            content=LONG_OUTPUT,
            tool_call_id=f"c{n}",
            tool_name="deploy_dashboard",
            outcome="done" if n % 3 else "rejected",
        )
    return conversation


def test_a_long_conversation_reads_on_one_short_page(admin_page, alice):
    conversation = long_conversation(alice)
    PendingConfirmation.objects.create(
        conversation=conversation,
        tool_call_id="c59",
        tool_name="deploy_dashboard",
        args={"dashboard_id": 59},
        edited_args={"dashboard_id": 58},
        args_hash="x",
        status="edited",
        decided_by=alice,
        decided_at=timezone.now(),
        expires_at=timezone.now() + timedelta(hours=1),
    )
    page = admin_page
    page.goto(f"/admin/conversations/conversation/{conversation.pk}/change/")
    expect(page.get_by_role("heading", name="Latest messages")).to_be_visible()
    height = page.evaluate("() => document.documentElement.scrollHeight")
    assert height < 4000, height  # 180 messages, as tall as 20
    rows = page.locator(".inline-related tbody tr.has_original")
    expect(rows).to_have_count(20)
    # A tool message says how its call ended; the others say nothing there.
    expect(page.locator("td.field-tool_outcome img")).to_have_count(7)
    expect(page.locator("td.field-tool_outcome", has_text="deploy_dashboard · rejected")).to_have_count(2)
    screenshot(page, "admin-conversation")

    page.get_by_role("link", name="180 messages, oldest first").click()
    expect(page.locator("#result_list tbody tr")).to_have_count(50)
    expect(page.locator("#result_list tbody tr").first).to_contain_text("Question 0")
    screenshot(page, "admin-messages")

    page.goto("/admin/conversations/pendingconfirmation/?status=all")
    expect(page.get_by_role("heading", name="Select confirmation to view")).to_be_visible()
    row = page.locator("#result_list tbody tr").first
    expect(row).to_contain_text("Edited by alice at ")
    expect(row).to_contain_text('{"dashboard_id": 59}, edited to {"dashboard_id": 58}')
    screenshot(page, "admin-confirmations")


def test_the_audit_log_says_which_tool_ran_with_what_and_what_was_decided(admin_page, alice):
    conversation = services.conversation_create(owner=alice, title="Deploys")
    message, _ = services.message_append(
        conversation=conversation,
        role=Message.Role.ASSISTANT,
        tool_calls=[{"id": "c1", "name": "deploy_dashboard", "args": {"dashboard_id": 3}}],
    )
    confirmation = services.confirmation_request(
        conversation=conversation,
        message_id=message.pk,
        tool_call_id="c1",
        tool_name="deploy_dashboard",
        args={"dashboard_id": 3, "environment": "production"},
        actor=alice,
    )
    services.confirmation_decide(confirmation=confirmation, decision="reject", actor=alice, reason="not on a Friday")
    page = admin_page
    page.goto("/admin/conversations/auditevent/?kind__exact=confirmation_decided")
    row = page.locator("#result_list tbody tr").first
    expect(row.locator("td.field-what")).to_have_text(
        'deploy_dashboard · {"dashboard_id": 3, "environment": "production"} · decision: reject · '
        "reason: not on a Friday"
    )
    expect(row.locator("td.field-actor")).to_have_text("alice")
    screenshot(page, "admin-audit")
