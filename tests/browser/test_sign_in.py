"""Signing in and out through the pages."""

from __future__ import annotations

from django.contrib.auth.hashers import PBKDF2PasswordHasher
from playwright.sync_api import expect

from conversations import services

from .conftest import PASSWORD, screenshot


def test_sign_in_shows_the_conversations_and_sign_out_returns_to_the_form(page, alice):
    # The server checks passwords with the project's hashers, not the tests' fast MD5 one.
    alice.password = PBKDF2PasswordHasher().encode(PASSWORD, PBKDF2PasswordHasher().salt())
    alice.save(update_fields=["password"])
    page.goto("/")
    expect(page).to_have_url("/accounts/login/?next=/")
    page.get_by_label("Username").fill("alice")
    page.get_by_label("Password").fill("wrong")
    page.get_by_role("button", name="Sign in").click()
    expect(page.get_by_role("alert")).to_contain_text("do not match")

    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Sign in").click()
    # With no conversation yet, at the message box that starts one.
    expect(page.get_by_role("heading", name="What can the agent do for you?")).to_be_visible()
    expect(page.get_by_label("Message", exact=True)).to_be_focused()
    expect(page.locator(".topbar .user")).to_contain_text("alice")

    page.get_by_role("button", name="Sign out").click()
    expect(page.get_by_role("heading", name="Sign in")).to_be_visible()
    page.goto("/")
    expect(page).to_have_url("/accounts/login/?next=/")


def test_sign_in_with_conversations_lands_on_the_message_box_above_them(page, alice):
    alice.password = PBKDF2PasswordHasher().encode(PASSWORD, PBKDF2PasswordHasher().salt())
    alice.save(update_fields=["password"])
    services.conversation_create(owner=alice, title="Quarterly revenue")
    page.goto("/")
    page.get_by_label("Username").fill("alice")
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Sign in").click()

    expect(page.get_by_role("heading", name="What can the agent do for you?")).to_be_visible()
    expect(page.get_by_label("Message", exact=True)).to_be_focused()
    expect(page.locator(".conversation-row .title")).to_have_text("Quarterly revenue")
    screenshot(page, "landing-with-conversations")
