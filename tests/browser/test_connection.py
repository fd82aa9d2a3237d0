"""Joining mid-answer (a reload, a second tab), the one-run gate, and reconnecting by itself."""

from __future__ import annotations

from playwright.sync_api import expect

from conversations.models import Message
from tests.fake_provider import Reply

from .conftest import screenshot, streamed
from .test_chat import open_chat

LONG = "".join(f"Sentence {n} of a long answer. " for n in range(1, 36))


def test_a_reload_mid_answer_shows_the_text_so_far_and_continues(page, signed_in, conversation, llm):
    llm.script(Reply(text=LONG, chunk_chars=8, interval=0.03))
    open_chat(page, conversation)
    page.get_by_label("Message", exact=True).fill("Tell me a long story")
    page.keyboard.press("Enter")
    before = streamed(page, 60)

    page.reload()
    expect(page.locator("#send")).to_be_enabled()
    after = streamed(page, len(before))  # the text so far came with `ready`, then live tokens follow
    assert after.startswith(before[:40])
    expect(page.get_by_role("button", name="Stop")).to_be_visible()
    screenshot(page, "reload-mid-answer")

    answer = page.locator('.msg-assistant[data-status="complete"] .msg-body')
    expect(answer).to_have_text(LONG.strip())  # whole, nothing lost and nothing twice
    expect(page.locator(".msg-assistant")).to_have_count(1)


def test_a_second_tab_follows_live_and_is_told_the_conversation_is_busy(context, signed_in, conversation, llm):
    llm.script(Reply(text=LONG, chunk_chars=8, interval=0.03))
    first, second = context.new_page(), context.new_page()
    open_chat(first, conversation)
    open_chat(second, conversation)
    first.get_by_label("Message", exact=True).fill("Tell me a long story")
    first.keyboard.press("Enter")

    # The second tab sees the question and the answer as they come.
    expect(second.locator(".msg-user .msg-text")).to_have_text("Tell me a long story")
    streamed(second, 30)
    expect(second.get_by_role("button", name="Stop")).to_be_visible()

    second.get_by_label("Message", exact=True).fill("And another thing")
    second.keyboard.press("Enter")
    expect(second.get_by_role("alert")).to_contain_text("This conversation is busy")
    expect(second.get_by_label("Message", exact=True)).to_have_value("And another thing")  # given back, not lost
    screenshot(second, "second-tab-busy")

    expect(first.locator('.msg-assistant[data-status="complete"]')).to_have_count(1)
    expect(second.locator('.msg-assistant[data-status="complete"] .msg-body')).to_have_text(LONG.strip())
    assert Message.objects.filter(conversation=conversation, role="user").count() == 1


def test_send_waits_for_the_socket_even_before_the_script_has_run(page, signed_in, conversation, llm):
    held = []
    page.route("**/static/js/chat.js", lambda route: held.append(route))
    page.goto(f"/c/{conversation.pk}/", wait_until="commit")
    send = page.locator("#send")
    box = page.get_by_label("Message", exact=True)
    box.fill("Typed while the page loads")
    expect(send).to_be_disabled()
    assert held, "the page asked for its script"

    held[0].continue_()
    expect(send).to_be_enabled()
    llm.script(Reply(text="Here now."))
    box.press("Enter")
    expect(page.locator(".msg-user .msg-text")).to_have_text("Typed while the page loads")
    expect(page.locator(".msg-assistant .msg-body")).to_have_text("Here now.")
    assert "?" not in page.url


def test_it_reconnects_by_itself_then_offers_retry(page, signed_in, conversation, llm):
    page.add_init_script("window.agentchatReconnectDelay = 150")
    state = {"refuse": False, "refused": 0, "sockets": []}

    def route(ws):
        if state["refuse"]:
            state["refused"] += 1
            ws.close()
            return
        ws.connect_to_server()
        state["sockets"].append(ws)

    page.route_web_socket("**/ws/chat/**", route)
    open_chat(page, conversation)

    state["refuse"] = True
    for ws in state["sockets"]:
        ws.close()
    connection = page.locator("#connection")
    expect(connection).to_contain_text("Reconnecting")
    expect(page.locator("#send")).to_be_disabled()
    expect(connection).to_contain_text("Connection lost.")
    retry = connection.get_by_role("button", name="Retry")
    expect(retry).to_be_visible()
    assert state["refused"] == 5
    screenshot(page, "connection-lost")

    state["refuse"] = False
    retry.click()
    expect(connection).to_be_hidden()
    expect(page.locator("#send")).to_be_enabled()
    llm.script(Reply(text="Back again."))
    page.get_by_label("Message", exact=True).fill("Are you there?")
    page.keyboard.press("Enter")
    expect(page.locator(".msg-assistant .msg-body")).to_have_text("Back again.")
