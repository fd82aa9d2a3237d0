"""A chat page stops acting for its user once they signed out elsewhere or were deactivated, and says why."""

from __future__ import annotations

from django.contrib.auth import get_user_model
from playwright.sync_api import expect

from conversations.models import Message

from .conftest import screenshot
from .test_chat import open_chat


def test_signing_out_in_another_tab_closes_the_chat_and_offers_to_sign_in(context, signed_in, conversation):
    chat = context.new_page()
    open_chat(chat, conversation)
    other = context.new_page()
    other.goto("/")
    other.get_by_role("button", name="Sign out").click()
    expect(other.get_by_role("heading", name="Sign in")).to_be_visible()

    expect(chat.get_by_role("alert")).to_contain_text("You signed out.")
    connection = chat.locator("#connection")
    expect(connection).to_contain_text("You are signed out. Sign in again to continue.")
    sign_in = connection.get_by_role("link", name="Sign in")
    expect(sign_in).to_have_attribute("href", f"/accounts/login/?next=%2Fc%2F{conversation.pk}%2F")
    expect(chat.get_by_label("Message", exact=True)).to_be_disabled()
    expect(chat.locator("#send")).to_be_disabled()
    screenshot(chat, "signed-out-in-another-tab")


def test_a_deactivated_user_cannot_send_and_is_told_why(page, signed_in, conversation, llm):
    open_chat(page, conversation)
    # A bulk update sends no signal: the message frame itself finds the account deactivated.
    get_user_model().objects.filter(pk=signed_in.pk).update(is_active=False)

    page.get_by_label("Message", exact=True).fill("Deploy dashboard 42")
    page.keyboard.press("Enter")

    expect(page.get_by_role("alert")).to_contain_text("This account has been deactivated.")
    expect(page.locator("#connection")).to_contain_text("Disconnected. Reload the page to continue.")
    box = page.get_by_label("Message", exact=True)
    expect(box).to_be_disabled()
    expect(box).to_have_value("Deploy dashboard 42")  # given back, not lost
    expect(page.locator("#send")).to_be_disabled()
    screenshot(page, "deactivated")
    assert not Message.objects.filter(conversation=conversation).exists()
    assert llm.requests == []
