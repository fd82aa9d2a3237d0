"""Files attached on the start page, before the first message: uploaded at once to a draft, which the message
begins; a draft left behind is listed nowhere, and discarded a day later."""

from __future__ import annotations

import json
import re
from datetime import timedelta

from django.utils import timezone
from playwright.sync_api import expect

from conversations import selectors, services
from conversations.models import Attachment, Conversation, Message
from tests.fake_provider import Reply

from .conftest import screenshot
from .test_accessibility import SIZES, violations
from .test_files import pdf_with_text

REPORT = {"name": "report.pdf", "mimeType": "application/pdf", "buffer": pdf_with_text("Revenue was 42 million")}


def drop(page, selector: str, name: str, text: str) -> None:
    data = page.evaluate_handle(
        "([name, text]) => { const data = new DataTransfer(); data.items.add(new File([text], name)); return data; }",
        [name, text],
    )
    page.dispatch_event(selector, "dragenter", {"dataTransfer": data})
    expect(page.locator("#drop-hint")).to_be_visible()
    page.dispatch_event(selector, "drop", {"dataTransfer": data})
    expect(page.locator("#drop-hint")).to_be_hidden()


def test_attach_files_before_the_first_message_and_send_them_with_it(page, signed_in, llm):
    llm.script(Reply(text="The report says revenue was 42 million."))
    page.goto("/c/new/")
    box = page.get_by_label("Message", exact=True)
    expect(box).to_be_focused()

    # The uploads are held on their way until the test lets them go.
    held = []
    page.route("**/attachments/", lambda route: held.append(route))
    with page.expect_file_chooser() as chooser:
        page.get_by_role("button", name="Attach a file").click()
    chooser.value.set_files(files=[REPORT])
    drop(page, ".start-page", "notes.csv", "name,amount\nSales,42\n")
    chips = page.locator("#attachments .chip")
    report, notes = chips.filter(has_text="report.pdf"), chips.filter(has_text="notes.csv")
    expect(report.locator("progress")).to_be_visible()
    expect(notes.locator(".chip-status")).to_have_text("uploading…")
    expect(page.get_by_role("button", name="Send")).to_be_disabled()  # not while a file is on its way
    box.fill("What does the report say?")
    page.keyboard.press("Enter")
    expect(page.get_by_role("status")).to_contain_text("Wait until the files have finished uploading.")
    while len(held) < 2:  # the browser tells of a request it sent between the test's steps
        page.wait_for_timeout(50)
    for route in held:
        route.continue_()
    expect(page.get_by_role("status")).to_have_count(0)  # the wait is over
    expect(report).to_have_class("chip done")
    expect(report.locator(".chip-status")).to_have_text("ready")
    expect(notes.locator(".chip-status")).to_have_text("ready")
    expect(page.get_by_role("button", name="Send")).to_be_enabled()
    screenshot(page, "start-page-files-ready")
    # Both went to one draft, which no list shows.
    [draft] = Conversation.objects.all()
    assert draft.is_draft and draft.attachments.count() == 2
    assert not selectors.conversations_for(signed_in, archived=None).exists()

    notes.get_by_role("button", name="Remove notes.csv").click()
    expect(chips).to_have_count(1)
    expect(box).to_be_focused()
    assert violations(page, "start page with a file") == []
    page.set_viewport_size(SIZES["phone"])
    screenshot(page, "start-page-file-phone")
    page.set_viewport_size(SIZES["desktop"])

    page.keyboard.press("Enter")
    expect(page).to_have_url(re.compile(rf"/c/{draft.pk}/$"))
    expect(page.locator(".msg-user .msg-text")).to_have_text("What does the report say?")
    expect(page.locator(".msg-user .chips .chip-name")).to_have_text("report.pdf")
    expect(page.locator("#attachments .chip")).to_have_count(0)
    expect(page.locator(".msg-assistant .msg-body")).to_contain_text("42 million")
    screenshot(page, "start-page-files-sent")
    message = Message.objects.get(conversation=draft, role="user")
    assert [item.original_name for item in message.attachments.all()] == ["report.pdf"]
    assert "Revenue was 42 million" in json.dumps(llm.requests[-1].body)

    page.reload()  # sent once, with its file
    expect(page.locator(".msg-user")).to_have_count(1)
    expect(page.locator("#attachments .chip")).to_have_count(0)
    page.goto("/")
    rows = page.locator(".conversation-row")
    expect(rows).to_have_count(1)
    expect(rows.first.locator(".title")).to_have_text("What does the report say?")
    assert Conversation.objects.count() == 1


def test_files_attached_and_left_behind_make_no_conversation(page, signed_in, llm):
    services.conversation_create(owner=signed_in, title="Quarterly revenue")
    page.goto("/c/new/")
    page.locator("#file-input").set_input_files(
        files=[{"name": "left.csv", "mimeType": "text/csv", "buffer": b"name,amount\nSales,42\n"}]
    )
    expect(page.locator("#attachments .chip .chip-status")).to_have_text("ready")
    left = Conversation.objects.get(is_draft=True)

    page.get_by_role("link", name="All conversations, search and archive").click()
    expect(page.locator(".conversation-row")).to_have_count(1)
    page.get_by_role("link", name="Quarterly revenue").click()
    expect(page.locator(".side-list li")).to_have_count(1)

    # A day on, the next file attached on a start page discards that draft, with its file.
    Conversation.objects.filter(pk=left.pk).update(created_at=timezone.now() - timedelta(days=1, minutes=1))
    page.goto("/c/new/")
    expect(page.locator("#attachments .chip")).to_have_count(0)
    page.locator("#file-input").set_input_files(
        files=[{"name": "new.csv", "mimeType": "text/csv", "buffer": b"name,amount\nChurn,7\n"}]
    )
    expect(page.locator("#attachments .chip .chip-status")).to_have_text("ready")
    assert not Conversation.objects.filter(pk=left.pk).exists()
    assert list(Attachment.objects.values_list("original_name", flat=True)) == ["new.csv"]
