"""The chat page: sending, the live stream, Markdown, tool cards, Stop, keyboard and phone width."""

from __future__ import annotations

import re

from playwright.sync_api import expect

from conversations.models import Message
from tests.fake_provider import Reply

from .conftest import screenshot, streamed

ANSWER = "Here is **the plan**:\n\n" + "".join(f"- step {n}: check the numbers again\n" for n in range(1, 13))


def open_chat(page, conversation):
    page.goto(f"/c/{conversation.pk}/")
    expect(page.locator("#send")).to_be_enabled()  # the socket is ready


def test_tokens_arrive_live_then_the_answer_is_rendered_as_markdown(page, signed_in, conversation, llm):
    llm.script(Reply(text=ANSWER, chunk_chars=5, interval=0.02))
    open_chat(page, conversation)
    box = page.get_by_label("Message", exact=True)
    box.fill("Make a plan")
    box.press("Enter")

    # Focus stays in the box, which is empty again, and the user's message is shown at once.
    expect(box).to_be_focused()
    expect(box).to_have_value("")
    expect(page.locator(".msg-user .msg-text")).to_have_text("Make a plan")

    # Part of the answer is on the page while the run is still going, already as Markdown.
    streaming = page.locator('.msg-assistant[data-status="streaming"] .msg-body')
    partial = streamed(page, 40)
    assert len(partial) < len(ANSWER.replace("**", ""))
    expect(streaming.locator("strong")).to_have_text("the plan")
    expect(streaming.locator("ul > li").first).to_have_text("step 1: check the numbers again")
    assert "**" not in streaming.text_content()
    expect(page.get_by_role("button", name="Stop")).to_be_visible()
    expect(page.locator("#run-status")).to_be_visible()
    screenshot(page, "chat-streaming")

    # At the end the server's rendering takes its place.
    answer = page.locator('.msg-assistant[data-status="complete"] .msg-body.markdown')
    expect(answer.locator("strong")).to_have_text("the plan")
    expect(answer.locator("li")).to_have_count(12)
    expect(page.get_by_role("button", name="Stop")).to_be_hidden()
    expect(page.locator("#run-status")).to_be_hidden()
    assert "**" not in answer.text_content()


def test_shift_enter_writes_a_new_line_and_enter_sends(page, signed_in, conversation, llm):
    llm.script(Reply(text="Noted."))
    open_chat(page, conversation)
    box = page.get_by_label("Message", exact=True)
    box.click()
    page.keyboard.type("first line")
    page.keyboard.press("Shift+Enter")
    page.keyboard.type("second line")
    expect(box).to_have_value("first line\nsecond line")
    page.keyboard.press("Enter")
    expect(page.locator(".msg-assistant .msg-body")).to_have_text("Noted.")
    assert Message.objects.get(conversation=conversation, role="user").content == "first line\nsecond line"
    expect(box).to_be_focused()


def test_a_tool_card_goes_from_spinner_to_check_with_input_and_output(page, signed_in, conversation, llm):
    llm.script(
        Reply(text="Let me look.", tool_calls=[("browser_lookup", {"query": "revenue", "seconds": 1.0}, "call_look")]),
        Reply(text="I found **2** matches."),
    )
    open_chat(page, conversation)
    page.get_by_label("Message", exact=True).fill("Find revenue reports")
    page.get_by_role("button", name="Send").click()

    card = page.locator('.tool-card[data-tool-call-id="call_look"]')
    expect(card).to_have_attribute("data-state", "running")
    expect(card.locator(".tool-name")).to_have_text("browser_lookup")
    expect(card.locator(".tool-state")).to_have_text("Running…")
    assert card.locator(".tool-name").evaluate("node => getComputedStyle(node).fontFamily").lower().find("mono") >= 0
    screenshot(page, "tool-card-running")

    expect(card).to_have_attribute("data-state", "ok")
    expect(card.locator(".tool-state")).to_have_text("Done")
    card.get_by_text("Input").click()
    expect(card.locator(".tool-input pre")).to_contain_text('"query": "revenue"')
    card.get_by_text("Output").click()
    expect(card.locator(".tool-output pre")).to_contain_text("revenue forecast")
    expect(page.locator(".msg-assistant").last.locator("strong")).to_have_text("2")

    # After a reload the same card is drawn by the server, already checked.
    page.reload()
    expect(page.locator('.tool-card[data-tool-call-id="call_look"]')).to_have_attribute("data-state", "ok")


def test_a_failing_tool_gets_a_red_cross(page, signed_in, conversation, llm):
    llm.script(Reply(tool_calls=[("browser_fail", {"query": "x"}, "call_fail")]), Reply(text="The catalogue is down."))
    open_chat(page, conversation)
    page.get_by_label("Message", exact=True).fill("Look up x")
    page.keyboard.press("Enter")
    card = page.locator('.tool-card[data-tool-call-id="call_fail"]')
    expect(card).to_have_attribute("data-state", "error")
    expect(card.locator(".tool-state")).to_have_text("Failed")
    card.get_by_text("Output").click()
    expect(card.locator(".tool-output pre")).to_contain_text("the catalogue is down")


def test_stop_keeps_the_partial_answer(page, signed_in, conversation, llm):
    llm.script(Reply(text="word " * 400, chunk_chars=5, interval=0.03))
    open_chat(page, conversation)
    page.get_by_label("Message", exact=True).fill("Talk for a long time")
    page.keyboard.press("Enter")
    streamed(page, 30)
    page.get_by_role("button", name="Stop").click()

    answer = page.locator(".msg-assistant")
    expect(answer).to_have_attribute("data-status", "interrupted")
    expect(answer.locator(".msg-status")).to_have_text("Stopped before the end. You pressed Stop.")
    expect(page.get_by_role("button", name="Stop")).to_be_hidden()
    shown = answer.locator(".msg-body").text_content()
    assert shown.strip().startswith("word word")
    stored = Message.objects.get(conversation=conversation, role="assistant")
    assert stored.status == Message.Status.INTERRUPTED
    assert 0 < len(stored.content) < len("word " * 400)
    expect(page.get_by_label("Message", exact=True)).to_be_enabled()


def test_markdown_code_tables_and_lists_on_a_phone(browser, server, signed_in, conversation, llm, context):
    answer = (
        "## Result\n\n| dashboard | status |\n| --- | ---: |\n| Sales | ok |\n| Churn | failing |\n\n"
        "```python\nprint('hello')\n```\n\n1. first\n2. second\n"
    )
    llm.script(Reply(text=answer, chunk_chars=20))
    phone = context.new_page()
    phone.set_viewport_size({"width": 390, "height": 844})
    open_chat(phone, conversation)
    expect(phone.locator(".sidebar")).to_be_hidden()
    phone.get_by_label("Message", exact=True).fill("Show the table")
    phone.keyboard.press("Enter")
    body = phone.locator('.msg-assistant[data-status="complete"] .markdown')
    expect(body.locator("table tr")).to_have_count(3)
    expect(body.locator("pre code")).to_have_text("print('hello')\n")
    expect(body.locator("ol li")).to_have_count(2)
    expect(phone.get_by_role("button", name="Send")).to_be_visible()  # the run has ended: Send is back from Stop
    # Nothing is wider than the screen but the table and code, which scroll inside themselves.
    width = phone.evaluate("() => document.documentElement.scrollWidth")
    assert width <= 390, width
    for selector in ["#send", "#attach", "#message"]:
        box = phone.locator(selector).bounding_box()
        assert box and box["x"] >= 0 and box["x"] + box["width"] <= 390, (selector, box)
    assert re.search(r"Result", body.text_content())


def test_the_step_limit_is_said_at_the_answer_and_a_loop_of_calls_folds(page, signed_in, conversation, llm):
    llm.script(*[Reply(tool_calls=[("browser_lookup", {"query": f"q{n}"}, f"call_{n}")]) for n in range(8)])
    open_chat(page, conversation)
    page.get_by_label("Message", exact=True).fill("Look everything up")
    page.keyboard.press("Enter")

    limit = "The agent reached its step limit before finishing."
    answer = page.locator('.msg-assistant[data-status="interrupted"]')
    expect(answer.locator(".msg-status")).to_have_text(limit)
    expect(answer.locator(".msg-body")).to_have_text("")
    expect(page.locator("#notices .notice")).to_have_count(0)
    expect(page.get_by_role("button", name="Continue")).to_be_visible()

    # Eight lookups in a row are one row that opens to show them.
    group = page.get_by_role("button", name="browser_lookup 8 calls Done")
    expect(group).to_have_attribute("aria-expanded", "false")
    expect(group).to_contain_text("× 8")
    expect(page.locator(".tool-card").first).to_be_hidden()
    screenshot(page, "step-limit-and-folded-calls")
    group.click()
    expect(group).to_have_attribute("aria-expanded", "true")
    expect(page.locator(".tool-card")).to_have_count(8)
    for card in page.locator(".tool-card").all():
        expect(card).to_be_visible()

    # A reload shows the same.
    page.reload()
    expect(page.locator(".msg-assistant .msg-status")).to_have_text(limit)
    expect(page.get_by_role("button", name="browser_lookup 8 calls Done")).to_be_visible()
    expect(page.locator(".tool-card").first).to_be_hidden()
    llm.script(Reply(text="Done at last."))
    page.get_by_role("button", name="Continue").click()
    expect(page.locator('.msg-assistant[data-status="complete"] .msg-body')).to_have_text("Done at last.")
