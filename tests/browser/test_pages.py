"""The conversation list (new, search, archive, restore, rename) and the language switch."""

from __future__ import annotations

import re

from playwright.sync_api import expect

from conversations import services
from conversations.models import Conversation
from tests.fake_provider import Reply

from .conftest import screenshot
from .test_chat import open_chat


def test_new_rename_search_archive_and_restore(page, signed_in, llm):
    for title in ["Quarterly revenue", "Churn analysis", "Team offsite"]:
        services.conversation_create(owner=signed_in, title=title)
    page.goto("/")
    rows = page.locator(".conversation-row")
    expect(rows).to_have_count(3)
    expect(rows.first.locator(".title")).to_have_text("Team offsite")  # newest first
    expect(rows.first.locator(".meta")).to_contain_text("0 questions")

    page.get_by_label("Search conversations").fill("churn")
    page.get_by_role("button", name="Search").click()
    expect(rows).to_have_count(1)
    expect(rows.first.locator(".title")).to_have_text("Churn analysis")

    row = rows.first
    row.get_by_text("Rename").click()
    row.get_by_label("New title").fill("Churn deep dive")
    row.get_by_role("button", name="Save").click()
    expect(page.get_by_role("status")).to_contain_text("Renamed.")
    page.goto("/")
    row = page.locator(".conversation-row", has_text="Churn deep dive")
    row.get_by_role("button", name="Archive").click()
    undo = page.locator(".undo")
    expect(undo).to_contain_text("“Churn deep dive” was archived.")
    expect(page.locator(".conversation-row")).to_have_count(2)
    screenshot(page, "list-archived-with-undo")
    undo.get_by_role("button", name="Undo").click()
    expect(page.get_by_role("status")).to_contain_text("“Churn deep dive” was restored.")
    expect(page.locator(".conversation-row")).to_have_count(3)
    page.locator(".conversation-row", has_text="Churn deep dive").get_by_role("button", name="Archive").click()
    expect(page.locator(".conversation-row")).to_have_count(2)

    page.get_by_role("link", name="Archived").click()
    expect(page.get_by_role("heading", name="Archived conversations")).to_be_visible()
    archived = page.locator(".conversation-row")
    expect(archived).to_have_count(1)
    screenshot(page, "list-archived")
    archived.first.get_by_role("button", name="Restore").click()
    expect(page.get_by_role("status")).to_contain_text("was restored")
    page.get_by_role("link", name="Active").click()
    expect(page.locator(".conversation-row")).to_have_count(3)

    # The list opens under the message box that starts a conversation. A conversation is made by its first
    # message: looking at the start page of its own (the chat's "New conversation") leaves nothing behind.
    expect(page.get_by_label("Message", exact=True)).to_be_visible()
    page.goto("/c/new/")
    expect(page.get_by_label("Message", exact=True)).to_be_focused()
    page.get_by_role("link", name="All conversations, search and archive").click()
    expect(page.locator(".conversation-row")).to_have_count(3)
    assert Conversation.objects.count() == 3


def test_sign_in_lands_on_the_message_box_and_the_first_message_starts_the_conversation(page, signed_in, llm):
    llm.script(Reply(text="Sales is on staging and production."))
    page.goto("/")
    box = page.get_by_label("Message", exact=True)
    expect(page.get_by_role("heading", name="What can the agent do for you?")).to_be_visible()
    expect(box).to_be_focused()
    screenshot(page, "start-page")
    assert not Conversation.objects.exists()

    box.fill("Where is the Sales dashboard deployed?")
    page.keyboard.press("Enter")
    expect(page).to_have_url(re.compile(r"/c/[0-9a-f-]{36}/$"))
    expect(page.locator(".msg-user .msg-text")).to_have_text("Where is the Sales dashboard deployed?")
    expect(page.locator(".msg-assistant .msg-body")).to_have_text("Sales is on staging and production.")
    expect(page.get_by_label("Message", exact=True)).to_have_value("")
    expect(page.locator("#chat-title")).to_have_text("Where is the Sales dashboard deployed?")
    # One question, however many messages the answer took.
    expect(page.locator('.side-list a[aria-current="page"] .count')).to_have_text("1 question")
    [conversation] = Conversation.objects.all()
    assert [m.role for m in conversation.messages.order_by("id")] == ["user", "assistant"]

    page.reload()  # the first message is sent once
    expect(page.locator(".msg-user")).to_have_count(1)
    expect(page.get_by_label("Message", exact=True)).to_have_value("")
    page.goto("/")
    expect(page.locator(".conversation-row .meta")).to_contain_text("1 question")


def test_an_archived_conversation_is_read_only_until_restored(page, signed_in, conversation, llm):
    llm.script(Reply(text="Hello there."))
    open_chat(page, conversation)
    page.get_by_label("Message", exact=True).fill("Hi")
    page.keyboard.press("Enter")
    expect(page.locator(".msg-assistant .msg-body")).to_have_text("Hello there.")
    page.locator(".chat-actions").get_by_role("button", name="Archive").click()
    expect(page.get_by_role("heading", name="Your conversations")).to_be_visible()
    page.goto(f"/c/{conversation.pk}/")
    expect(page.locator("#archived-banner")).to_be_visible()
    expect(page.get_by_label("Message", exact=True)).to_be_disabled()
    page.locator(".chat-actions").get_by_role("button", name="Restore").click()
    expect(page.locator("#archived-banner")).to_be_hidden()
    expect(page.get_by_label("Message", exact=True)).to_be_enabled()
    expect(page.locator(".msg-assistant .msg-body")).to_have_text("Hello there.")


def test_switch_to_russian_and_the_choice_is_remembered(page, signed_in, conversation, llm):
    open_chat(page, conversation)
    page.get_by_role("button", name="Русский").click()
    expect(page.locator("html")).to_have_attribute("lang", "ru")
    expect(page.get_by_role("button", name="Выйти")).to_be_visible()
    expect(page.get_by_role("button", name="Отправить")).to_be_visible()
    expect(page.get_by_label("Сообщение", exact=True)).to_have_attribute("placeholder", "Напишите агенту…")

    # Strings made by the script are translated too.
    page.locator("#file-input").set_input_files(
        files=[{"name": "virus.exe", "mimeType": "application/octet-stream", "buffer": b"MZ"}]
    )
    expect(page.get_by_role("alert")).to_contain_text("такие файлы не поддерживаются")

    # Remembered on the next page.
    page.goto("/")
    expect(page.get_by_role("heading", name="Ваши беседы")).to_be_visible()
    expect(page.locator(".lang-switch .current")).to_have_text("Русский")
    screenshot(page, "list-russian")
    page.goto(f"/c/{conversation.pk}/")
    expect(page.locator("#send")).to_be_enabled()
    llm.script(Reply(tool_calls=[("browser_deploy", {"dashboard": "Продажи"}, "call_ru")]))
    page.get_by_label("Сообщение", exact=True).fill("Разверни")
    page.keyboard.press("Enter")
    card = page.locator(".confirm-card")
    expect(card.get_by_role("button", name="Одобрить")).to_be_visible()
    expect(page.locator('.tool-card[data-tool-call-id="call_ru"] .tool-state')).to_have_text("Ждёт вашего решения")
    screenshot(page, "chat-russian")


def test_the_list_reads_well_on_a_phone(page, signed_in):
    for n in range(3):
        services.conversation_create(owner=signed_in, title=f"A rather long conversation title, number {n}, on budgets")
    page.set_viewport_size({"width": 390, "height": 844})
    page.goto("/")
    expect(page.locator(".conversation-row")).to_have_count(3)
    assert page.evaluate("() => document.documentElement.scrollWidth") <= 390
    expect(page.get_by_role("button", name="Sign out")).to_be_in_viewport()
    expect(page.get_by_role("button", name="Русский")).to_be_in_viewport()
