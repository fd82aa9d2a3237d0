"""The notice bar and errors in plain words."""

from __future__ import annotations

from playwright.sync_api import expect

from tests.fake_provider import Reply

from .conftest import screenshot
from .test_chat import open_chat


def test_a_provider_retry_is_noticed_and_the_answer_still_comes(page, signed_in, conversation, llm):
    llm.script(Reply(tool_calls=[("browser_lookup", "{not json")]), Reply(text="Second time lucky."))
    open_chat(page, conversation)
    page.get_by_label("Message", exact=True).fill("Look something up")
    page.keyboard.press("Enter")
    expect(page.locator(".msg-assistant .msg-body")).to_have_text("Second time lucky.")
    expect(page.locator(".side-list [aria-current=page] .count")).to_have_text("2 messages")
    notice = page.locator("#notices .notice-info")
    expect(notice.locator("span")).to_have_text("The model's answer could not be used, so it was asked again.")
    screenshot(page, "notice-provider-retry")
    notice.get_by_role("button", name="Dismiss").click()
    expect(page.locator("#notices .notice")).to_have_count(0)


def test_a_provider_failure_is_said_in_plain_words(page, signed_in, conversation, llm):
    llm.script(Reply(status=401))
    open_chat(page, conversation)
    page.get_by_label("Message", exact=True).fill("Hello?")
    page.keyboard.press("Enter")
    expect(page.get_by_role("alert")).to_contain_text("The language model could not answer. Try again in a moment.")
    expect(page.get_by_role("button", name="Stop")).to_be_hidden()
    assert "sk-test" not in page.content()


def test_a_message_too_long_to_send_stays_in_the_box(page, signed_in, conversation, llm):
    open_chat(page, conversation)
    box = page.get_by_label("Message", exact=True)
    text = "All of this. " * 90_000  # 1.2 MB
    box.fill(text)
    page.keyboard.press("Enter")
    expect(page.get_by_role("alert")).to_contain_text("Your message is too long to send")
    assert box.input_value() == text
    expect(page.locator(".msg-user")).to_have_count(0)
    assert llm.requests == []
