"""Under the Content-Security-Policy every page still works, and Chromium reports no violation on any of them."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.hashers import PBKDF2PasswordHasher
from django.test import Client
from playwright.sync_api import expect

from conversations import services
from tests.fake_provider import Reply

from .conftest import PASSWORD, screenshot

# A right-aligned column: nh3 keeps its style="text-align:right", which the policy allows by hash.
ANSWER = "Revenue by quarter:\n\n| quarter | revenue |\n| :-- | --: |\n| Q1 | 1,200 |\n| Q2 | 1,450 |\n"

# Reported to Python rather than kept in the page, so that violations during a navigation are not lost.
REPORT_VIOLATIONS = """
document.addEventListener("securitypolicyviolation", (event) => {
  window.reportViolation(`${event.violatedDirective} blocked ${event.blockedURI || "inline"} on ${event.documentURI}`);
});
"""
BROWSER_COMPLAINTS = ("Content Security Policy", "Refused to", "Permissions-Policy", "Permissions policy")


@pytest.fixture
def violations(context):
    """Every CSP violation, console complaint about a policy and uncaught error in the context's pages."""
    found: list[str] = []
    context.expose_function("reportViolation", lambda text: found.append(text))
    context.add_init_script(REPORT_VIOLATIONS)

    def watch(page):
        page.on("console", lambda m: any(c in m.text for c in BROWSER_COMPLAINTS) and found.append(m.text))
        page.on("pageerror", lambda error: found.append(f"uncaught: {error}"))

    for page in context.pages:
        watch(page)
    context.on("page", watch)
    return found


def test_sign_in_and_chat_without_violations(page, alice, llm, violations):
    # The server checks passwords with the project's hashers, not the tests' fast MD5 one. An update() sends no
    # signal: this test process has no socket to tell about it.
    hasher = PBKDF2PasswordHasher()
    get_user_model().objects.filter(pk=alice.pk).update(password=hasher.encode(PASSWORD, hasher.salt()))
    conversation = services.conversation_create(owner=alice)
    llm.script(Reply(text=ANSWER, chunk_chars=6, interval=0.01))

    page.goto(f"/c/{conversation.pk}/")
    page.get_by_label("Username").fill("alice")
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Sign in").click()
    expect(page.locator("#send")).to_be_enabled()  # the socket to the page's own host is open
    box = page.get_by_label("Message", exact=True)
    box.fill("Revenue please")
    box.press("Enter")

    answer = page.locator('.msg-assistant[data-status="complete"] .msg-body.markdown')
    expect(answer.locator("td").last).to_have_text("1,450")
    expect(answer.locator("td").last).to_have_css("text-align", "right")
    expect(answer.locator("td").first).to_have_css("text-align", "left")
    # The server's rendering of the same answer.
    page.reload()
    expect(page.locator("#send")).to_be_enabled()
    expect(answer.locator("td").last).to_have_css("text-align", "right")
    screenshot(page, "csp-chat")
    assert violations == []


def test_admin_pages_without_violations(page, context, server, alice, violations):
    admin = get_user_model().objects.create_superuser("root", "root@example.com", "unused")
    services.conversation_create(owner=alice, title="Quarterly revenue")
    client = Client()
    client.force_login(admin)
    context.add_cookies([{"name": "sessionid", "value": client.cookies["sessionid"].value, "url": server.http_url}])

    page.goto("/admin/")
    expect(page.locator("#conversations-conversation")).to_be_visible()
    page.goto("/admin/conversations/conversation/")
    expect(page.get_by_role("link", name="Quarterly revenue")).to_be_visible()
    page.get_by_role("link", name="Quarterly revenue").click()
    expect(page.get_by_label("Title")).to_have_value("Quarterly revenue")
    # The most script-heavy page: the permission pickers and the date and time shortcuts.
    page.goto(f"/admin/auth/user/{alice.pk}/change/")
    expect(page.locator("#id_user_permissions_from")).to_be_visible()
    expect(page.locator(".datetimeshortcuts").first).to_be_visible()
    screenshot(page, "csp-admin")
    assert violations == []


def test_api_docs_render_and_try_a_call_without_violations(page, signed_in, violations):
    services.conversation_create(owner=signed_in, title="From the docs")
    page.goto("/api/docs/")
    operations = page.locator(".opblock")
    expect(operations.first).to_be_visible()
    assert operations.count() > 5
    listing = page.locator("#operations-assistant-assistant_conversations_list")
    listing.locator(".opblock-summary").click()
    page.get_by_role("button", name="Try it out").click()
    page.get_by_role("button", name="Execute").click()
    expect(listing.locator(".live-responses-table tbody .response-col_status")).to_have_text("200")
    expect(listing.locator(".live-responses-table")).to_contain_text("From the docs")
    screenshot(page, "csp-api-docs")
    assert violations == []
