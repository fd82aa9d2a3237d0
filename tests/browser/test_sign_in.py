"""Signing in and out through the pages."""

from __future__ import annotations

from django.contrib.auth.hashers import PBKDF2PasswordHasher
from playwright.sync_api import expect

from .conftest import PASSWORD


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
    expect(page.get_by_role("heading", name="Your conversations")).to_be_visible()
    expect(page.locator(".topbar .user")).to_contain_text("alice")
    expect(page.get_by_text("No conversations yet.")).to_be_visible()

    page.get_by_role("button", name="Sign out").click()
    expect(page.get_by_role("heading", name="Sign in")).to_be_visible()
    page.goto("/")
    expect(page).to_have_url("/accounts/login/?next=/")
