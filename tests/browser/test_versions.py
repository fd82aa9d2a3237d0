"""Earlier versions on the chat page: what a regenerate or an edit replaced stays reachable, read-only, behind
"Previous versions" just above what replaced it: live in every tab, after a reload, and after a reconnection."""

from __future__ import annotations

from playwright.sync_api import expect

from tests.fake_provider import Reply

from .conftest import screenshot
from .test_answers import ask
from .test_chat import open_chat

# Each row of the conversation, earlier versions included: its kind, what names it, the version it is in and
# what it says of itself (a group's summary, a version's label).
ROWS = """() => Array.from(document.querySelectorAll(
  '#messages .msg, #messages .tool-card, #messages .versions, #messages .version'
), (node) => [
  node.classList.contains('versions') ? 'versions' : node.classList.contains('version') ? 'version'
    : node.classList.contains('tool-card') ? 'tool' : node.classList.contains('msg-user') ? 'user' : 'assistant',
  node.dataset.messageId || node.dataset.toolCallId || node.dataset.after || node.dataset.branch || '',
  node.parentElement.closest('.version')?.dataset.branch || '',
  (node.querySelector(':scope > details > summary, :scope > .version-label')?.textContent || '').trim(),
])"""


def previous(scope, count: int):
    label = f"Previous version ({count})" if count == 1 else f"Previous versions ({count})"
    return scope.locator("summary").filter(has_text=label)


def live_answer(page):
    return page.locator("#messages > .msg-assistant .msg-body")


def test_a_regenerated_answer_stays_behind_previous_versions_in_every_tab_and_after_a_reload(
    context, signed_in, conversation, llm
):
    llm.script(Reply(text="Paris, *probably*."), Reply(text="Lyon?"), Reply(text="The capital is **Paris**."))
    page, other = context.new_page(), context.new_page()
    open_chat(page, conversation)
    open_chat(other, conversation)
    ask(page, "Capital of France?")
    expect(live_answer(page)).to_have_text("Paris, probably.")
    page.get_by_role("button", name="Regenerate the answer").click()
    expect(live_answer(page)).to_have_text(["Lyon?"])
    page.get_by_role("button", name="Regenerate the answer").click()
    expect(live_answer(page).locator("strong")).to_have_text("Paris")

    for tab in (page, other):
        expect(live_answer(tab)).to_have_count(1)
        summary = previous(tab, 2)
        expect(summary).to_be_visible()
        expect(tab.get_by_text("Lyon?")).to_be_hidden()
        # Just above the answer that replaced them, under the question.
        expect(tab.locator("#messages > .msg-user + .versions + .msg-assistant")).to_have_count(1)
        summary.click()
        expect(tab.locator(".versions > details")).to_have_attribute("open", "")
        first, second = tab.locator(".version").nth(0), tab.locator(".version").nth(1)
        expect(first.locator(".version-label")).to_have_text("Version 1 of 3")
        expect(first.locator(".msg-assistant em")).to_have_text("probably")
        expect(second.locator(".version-label")).to_have_text("Version 2 of 3")
        expect(second.locator(".msg-assistant .msg-body")).to_have_text("Lyon?")
        expect(second.get_by_role("list", name="Version 2 of 3")).to_be_visible()
    screenshot(page, "previous-versions-of-an-answer")
    # The focus stays on the control, which closes them again.
    page.keyboard.press("Enter")
    expect(page.get_by_text("Lyon?")).to_be_hidden()

    page.reload()
    previous(page, 2).click()
    expect(page.locator(".version").first.locator(".msg-assistant em")).to_have_text("probably")
    expect(page.locator(".version-label")).to_have_text(["Version 1 of 3", "Version 2 of 3"])
    expect(live_answer(page).locator("strong")).to_have_text("Paris")
    # Nothing of an earlier version changes what Regenerate and Continue offer.
    expect(page.get_by_role("button", name="Regenerate the answer")).to_be_visible()
    expect(page.get_by_role("button", name="Continue")).to_be_hidden()


def test_an_edited_question_keeps_the_old_branch_read_only_with_its_own_earlier_answers(
    page, signed_in, conversation, llm
):
    page.add_init_script("window.agentchatReconnectDelay = 150")
    sockets = []

    def route(ws):
        ws.connect_to_server()
        sockets.append(ws)

    page.route_web_socket("**/ws/chat/**", route)
    llm.script(
        Reply(text="Looking.", tool_calls=[("browser_lookup", {"query": "seven"}, "call_seven")]),
        Reply(text="Deploying seven."),
        Reply(text="Deploying 7."),
        Reply(text="Deploying 8."),
    )
    open_chat(page, conversation)
    ask(page, "Deploy dashboard 7")
    expect(live_answer(page)).to_have_text(["Looking.", "Deploying seven."])
    page.get_by_role("button", name="Regenerate the answer").click()
    expect(live_answer(page)).to_have_text(["Deploying 7."])
    question = page.locator("#messages > .msg-user")
    question.hover()
    question.get_by_role("button", name="Edit").click()
    question.get_by_label("Your message").fill("Deploy dashboard 8")
    question.get_by_role("button", name="Save and send").click()
    expect(live_answer(page)).to_have_text(["Deploying 8."])

    # Above the new question: the old one, with the answer it had last, and inside, the answer before that.
    expect(page.locator("#messages > .versions + .msg-user .msg-text")).to_have_text("Deploy dashboard 8")
    outer = page.locator("#messages > .versions")
    previous(outer, 1).first.click()
    old = outer.locator(".version").first
    expect(old.locator(".version-label").first).to_have_text("Version 1 of 2")
    expect(old.locator(".msg-user .msg-text")).to_have_text("Deploy dashboard 7")
    expect(old.locator(":scope > .version-messages > .msg-assistant .msg-body")).to_have_text("Deploying 7.")
    expect(old.get_by_role("button", name="Edit")).to_have_count(0)
    previous(old, 1).click()
    expect(old.locator(".versions .msg-assistant .msg-body").first).to_have_text("Looking.")
    expect(old.locator('.tool-card[data-tool-call-id="call_seven"]')).to_have_attribute("data-state", "ok")
    expect(old.locator(".versions .msg-assistant .msg-body").last).to_have_text("Deploying seven.")
    screenshot(page, "previous-versions-of-a-question")
    drawn = page.evaluate(ROWS)

    # Reconnected, the page draws the conversation again from the history API: the same rows, in the same places.
    page.evaluate("document.querySelector('#messages > .versions').dataset.drawnBy = 'server'")
    for ws in sockets:
        ws.close()
    expect(page.locator("[data-drawn-by]")).to_have_count(0)
    expect(page.locator("#send")).to_be_enabled()
    assert page.evaluate(ROWS) == drawn

    page.reload()
    expect(page.locator("#send")).to_be_enabled()
    assert page.evaluate(ROWS) == drawn
