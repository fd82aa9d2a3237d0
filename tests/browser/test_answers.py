"""Working with answers on the chat page: regenerate, edit and resend, Escape to stop and Continue, copy."""

from __future__ import annotations

from playwright.sync_api import expect

from conversations.models import Message
from tests.fake_provider import Reply

from .conftest import screenshot, streamed
from .test_chat import open_chat


def ask(page, text: str) -> None:
    box = page.get_by_label("Message", exact=True)
    box.fill(text)
    box.press("Enter")


def test_regenerate_replaces_the_answer_on_the_page(page, signed_in, conversation, llm):
    llm.script(Reply(text="Paris, probably."), Reply(text="The capital of France is **Paris**."))
    open_chat(page, conversation)
    ask(page, "Capital of France?")
    expect(page.locator(".msg-assistant .msg-body")).to_have_text("Paris, probably.")

    page.get_by_role("button", name="Regenerate the answer").click()

    answer = page.locator("#messages > .msg-assistant")
    expect(answer.locator("strong")).to_have_text("Paris")
    expect(answer).to_have_count(1)
    # The old answer is kept behind "Previous version (1)" (tests/browser/test_versions.py).
    expect(page.get_by_text("Paris, probably.")).to_be_hidden()
    expect(page.get_by_label("Message", exact=True)).to_be_focused()
    rows = Message.objects.filter(conversation=conversation, role="assistant").order_by("id")
    assert [(row.content, row.superseded) for row in rows] == [
        ("Paris, probably.", True),
        ("The capital of France is **Paris**.", False),
    ]
    # A reload shows the live branch, and the old answer as hidden as before.
    page.reload()
    expect(page.locator(".msg-assistant strong")).to_have_text("Paris")
    expect(page.get_by_text("Paris, probably.")).to_be_hidden()


def test_an_edited_question_is_answered_in_place_of_the_old_one(page, signed_in, conversation, llm):
    llm.script(Reply(text="Deploying 7."), Reply(text="Deploying 8."))
    open_chat(page, conversation)
    ask(page, "Deploy dashboard 7")
    expect(page.locator(".msg-assistant .msg-body")).to_have_text("Deploying 7.")

    question = page.locator(".msg-user")
    question.hover()
    question.get_by_role("button", name="Edit").click()
    editor = question.get_by_label("Your message")
    expect(editor).to_be_focused()
    expect(editor).to_have_value("Deploy dashboard 7")
    editor.fill("Deploy dashboard 8")
    screenshot(page, "editing-a-question")
    question.get_by_role("button", name="Save and send").click()

    expect(page.locator("#messages > .msg-user .msg-text")).to_have_text("Deploy dashboard 8")
    expect(page.locator("#messages > .msg-assistant .msg-body")).to_have_text("Deploying 8.")
    assert llm.requests[1].messages[1:] == [{"role": "user", "content": "Deploy dashboard 8"}]


def test_escape_stops_and_continue_picks_the_answer_up(page, signed_in, conversation, llm):
    llm.script(Reply(text="word " * 400, chunk_chars=5, interval=0.03), Reply(text="And that is all."))
    open_chat(page, conversation)
    ask(page, "Talk for a long time")
    streamed(page, 30)
    expect(page.get_by_role("button", name="Send")).to_be_hidden()

    page.keyboard.press("Escape")

    expect(page.locator(".msg-assistant").first).to_have_attribute("data-status", "interrupted")
    expect(page.get_by_role("button", name="Send")).to_be_visible()
    expect(page.get_by_label("Message", exact=True)).to_be_focused()
    page.get_by_role("button", name="Continue").click()
    expect(page.locator(".msg-assistant").nth(1).locator(".msg-body")).to_have_text("And that is all.")
    expect(page.get_by_role("button", name="Continue")).to_be_hidden()
    expect(page.get_by_role("button", name="Regenerate the answer")).to_be_visible()
    assert llm.requests[1].messages[-1]["role"] == "assistant"


def test_copy_puts_the_answer_on_the_clipboard(page, context, signed_in, conversation, llm, server):
    context.grant_permissions(["clipboard-read", "clipboard-write"], origin=server.http_url)
    llm.script(Reply(text="Copy **this** line."))
    open_chat(page, conversation)
    ask(page, "Something to copy")
    answer = page.locator(".msg-assistant")
    expect(answer.locator("strong")).to_have_text("this")

    answer.get_by_role("button", name="Copy").click()

    expect(answer.get_by_role("button", name="Copied")).to_be_visible()
    assert page.evaluate("navigator.clipboard.readText()") == "Copy this line."
