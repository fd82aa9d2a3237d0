"""Attaching files: checked in the browser, uploaded with progress, sent as chips on the message."""

from __future__ import annotations

import json

import pytest
from django.urls import Resolver404, resolve
from playwright.sync_api import expect

from conversations.models import Message
from tests.fake_provider import Reply

from .conftest import screenshot
from .test_chat import open_chat


def upload_endpoint_exists() -> bool:
    try:
        resolve("/api/assistant/conversations/00000000-0000-0000-0000-000000000000/attachments/")
    except Resolver404:
        return False
    return True


needs_upload_endpoint = pytest.mark.skipif(
    not upload_endpoint_exists(), reason="POST /api/assistant/conversations/{id}/attachments/ is not there yet"
)


def pdf_with_text(text: str) -> bytes:
    """A one-page PDF whose text layer says `text`."""
    stream = f"BT /F1 18 Tf 72 720 Td ({text}) Tj ET".encode()
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Resources << /Font << /F1 4 0 R >> >> "
        b"/Contents 5 0 R >>",
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
        b"<< /Length %d >>\nstream\n%s\nendstream" % (len(stream), stream),
    ]
    out = bytearray(b"%PDF-1.4\n")
    offsets = []
    for number, body in enumerate(objects, start=1):
        offsets.append(len(out))
        out += b"%d 0 obj\n%s\nendobj\n" % (number, body)
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    out += b"".join(b"%010d 00000 n \n" % offset for offset in offsets)
    out += b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (len(objects) + 1, xref)
    return bytes(out)


def test_the_browser_refuses_other_kinds_and_files_over_10_mb(page, signed_in, conversation, tmp_path):
    big = tmp_path / "huge.csv"
    with open(big, "wb") as handle:
        handle.truncate(10 * 1024 * 1024 + 1)
    open_chat(page, conversation)
    page.locator("#file-input").set_input_files(
        files=[{"name": "setup.exe", "mimeType": "application/octet-stream", "buffer": b"MZ\x90\x00"}]
    )
    expect(page.get_by_role("alert")).to_contain_text("setup.exe: this kind of file is not supported")
    page.locator("#file-input").set_input_files(big)
    expect(page.get_by_role("alert").filter(has_text="huge.csv")).to_contain_text("is larger than 10 MB")
    expect(page.locator("#attachments .chip")).to_have_count(0)


@needs_upload_endpoint
def test_attach_a_pdf_with_the_button_and_ask_about_it(page, signed_in, conversation, llm):
    llm.script(Reply(text="The report says revenue was 42 million."))
    open_chat(page, conversation)

    # Hold the upload's answer back a little, to see the progress bar at work.
    def slow(route):
        page.wait_for_timeout(400)
        route.continue_()

    page.route("**/attachments/", slow)
    with page.expect_file_chooser() as chooser:
        page.get_by_role("button", name="Attach a file").click()
    chooser.value.set_files(
        files=[{"name": "report.pdf", "mimeType": "application/pdf", "buffer": pdf_with_text("Revenue was 42 million")}]
    )
    chip = page.locator("#attachments .chip")
    expect(chip.locator(".chip-name")).to_have_text("report.pdf")
    expect(chip.locator("progress")).to_be_visible()
    expect(page.locator("#send")).to_be_disabled()  # not while a file is on its way
    expect(chip).to_have_class("chip done")
    expect(chip.locator(".chip-status")).to_have_text("ready")
    expect(page.locator("#send")).to_be_enabled()
    screenshot(page, "file-attached")

    page.get_by_label("Message", exact=True).fill("What does the report say?")
    page.keyboard.press("Enter")
    sent = page.locator(".msg-user .chips .chip-name")
    expect(sent).to_have_text("report.pdf")
    expect(page.locator("#attachments .chip")).to_have_count(0)
    expect(page.locator(".msg-assistant .msg-body")).to_contain_text("42 million")

    message = Message.objects.get(conversation=conversation, role="user")
    assert [item.original_name for item in message.attachments.all()] == ["report.pdf"]
    assert "Revenue was 42 million" in json.dumps(llm.requests[-1].body)
    page.reload()
    expect(page.locator(".msg-user .chips .chip-name")).to_have_text("report.pdf")


@needs_upload_endpoint
def test_drop_files_and_the_server_refuses_one_it_cannot_read(page, signed_in, conversation, llm):
    open_chat(page, conversation)
    drop = page.evaluate_handle(
        """() => {
            const data = new DataTransfer();
            data.items.add(new File(['name,amount\\nSales,42\\n'], 'numbers.csv', {type: 'text/csv'}));
            data.items.add(new File(['%PDF-1.4\\n1 0 obj\\n<< /Type /Cat'], 'broken.pdf', {type: 'application/pdf'}));
            return data;
        }"""
    )
    page.dispatch_event("#chat", "dragenter", {"dataTransfer": drop})
    expect(page.locator("#drop-hint")).to_be_visible()
    page.dispatch_event("#chat", "drop", {"dataTransfer": drop})
    expect(page.locator("#drop-hint")).to_be_hidden()
    good = page.locator("#attachments .chip", has_text="numbers.csv")
    bad = page.locator("#attachments .chip", has_text="broken.pdf")
    expect(good.locator(".chip-status")).to_have_text("ready")
    expect(bad).to_have_class("chip failed")
    expect(bad.locator(".chip-status")).to_contain_text("could not be read")
    screenshot(page, "file-refused")
    bad.get_by_role("button", name="Remove broken.pdf").click()
    expect(page.locator("#attachments .chip")).to_have_count(1)
