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
    expect(page.locator(".side-list [aria-current=page] .count")).to_have_text("1 question")
    notice = page.locator("#notices .notice-info")
    expect(notice.locator("span")).to_have_text("The model's answer could not be used, so it was asked again.")
    screenshot(page, "notice-provider-retry")
    notice.get_by_role("button", name="Dismiss").click()
    expect(page.locator("#notices .notice")).to_have_count(0)


def test_a_provider_failure_is_said_at_the_answer_with_retry(page, signed_in, conversation, llm):
    llm.script(Reply(status=401))
    open_chat(page, conversation)
    page.get_by_label("Message", exact=True).fill("Hello?")
    page.keyboard.press("Enter")
    failed = page.locator('.msg-assistant[data-status="failed"]')
    expect(failed.locator(".msg-status")).to_contain_text("The answer could not be finished.")
    expect(page.get_by_role("button", name="Stop")).to_be_hidden()
    expect(page.locator("#notices .notice")).to_have_count(0)  # the answer says it: no banner says it again
    assert "sk-test" not in page.content()
    screenshot(page, "failed-answer-with-retry")

    # Retry is there after a reload too, and sends `continue`, as Continue does.
    page.reload()
    retry = page.locator('.msg-assistant[data-status="failed"]').get_by_role("button", name="Retry")
    expect(retry).to_be_visible()
    llm.script(Reply(text="Back on track."))
    retry.click()
    expect(page.locator('.msg-assistant[data-status="complete"] .msg-body')).to_have_text("Back on track.")
    expect(retry).to_be_hidden()
    expect(page.get_by_label("Message", exact=True)).to_be_focused()


def test_a_notice_replaces_its_like_and_the_wait_for_uploads_ends_with_them(page, signed_in, conversation, llm):
    llm.script(Reply(text="Read it."))
    open_chat(page, conversation)
    held = []
    page.route("**/attachments/", lambda route: held.append(route))  # the upload waits until the test lets it go
    page.locator("#file-input").set_input_files(files=[{"name": "a.csv", "mimeType": "text/csv", "buffer": b"a\n1\n"}])
    box = page.get_by_label("Message", exact=True)
    box.fill("Read the file")
    box.press("Enter")
    box.press("Enter")
    notices = page.locator("#notices .notice")
    expect(notices).to_have_count(1)
    expect(notices.locator("span")).to_have_text("Wait until the files have finished uploading.")
    page.locator("#file-input").set_input_files(
        files=[{"name": "virus.exe", "mimeType": "application/octet-stream", "buffer": b"MZ"}]
    )
    expect(notices).to_have_count(2)
    screenshot(page, "notices-two-kinds")

    held[0].continue_()
    expect(page.locator("#attachments .chip-status")).to_have_text("ready")
    expect(notices).to_have_count(1)
    expect(notices).to_contain_text("virus.exe")

    # The next message that goes clears what is left.
    box.press("Enter")
    expect(page.locator(".msg-user .chip-name")).to_have_text("a.csv")
    expect(notices).to_have_count(0)


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
