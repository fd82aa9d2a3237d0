"""The pages on a phone, 390 px wide: the conversation list as a drawer, tables and code that scroll inside
themselves, file names that can be read, and a list page of compact rows."""

from __future__ import annotations

from playwright.sync_api import expect

from conversations import services
from tests.fake_provider import Reply

from .conftest import screenshot
from .test_chat import open_chat

PHONE = {"width": 390, "height": 844}

WIDE_TABLE = (
    "| dashboard | owner | checks | errors | warnings | last run |\n"
    "| --- | --- | ---: | ---: | ---: | --- |\n"
    "| Quarterly revenue | finance-team | 12 | 3 | 17 | 2026-11-30 |\n"
    "| Customer churn | growth-analytics | 8 | 0 | 4 | 2026-11-29 |\n"
)


def on_a_phone(page):
    page.set_viewport_size(PHONE)
    return page


def test_the_conversation_list_is_a_drawer(page, signed_in, conversation):
    services.conversation_create(owner=signed_in, title="Budget review")
    page.emulate_media(color_scheme="dark")  # a phone at night: the drawer in the dark theme
    open_chat(on_a_phone(page), conversation)
    sidebar = page.get_by_role("complementary", name="Conversations")
    expect(sidebar).to_be_hidden()

    toggle = page.get_by_role("button", name="Conversations")
    toggle.click()
    expect(sidebar).to_be_visible()
    expect(toggle).to_have_attribute("aria-expanded", "true")
    expect(sidebar.get_by_role("link", name="Budget review")).to_be_visible()
    expect(sidebar.locator('a[aria-current="page"]')).to_be_focused()
    screenshot(page, "phone-drawer-open")

    page.keyboard.press("Escape")
    expect(sidebar).to_be_hidden()
    expect(toggle).to_be_focused()
    expect(toggle).to_have_attribute("aria-expanded", "false")

    toggle.click()
    sidebar.get_by_role("button", name="Close the list").click()
    expect(sidebar).to_be_hidden()
    expect(toggle).to_be_focused()

    toggle.click()
    page.mouse.click(370, 400)  # beside the drawer
    expect(sidebar).to_be_hidden()

    toggle.click()
    sidebar.get_by_role("link", name="Budget review").click()
    expect(page.get_by_role("heading", name="Budget review")).to_be_visible()


def test_tables_and_code_scroll_inside_the_answer(page, signed_in, conversation, llm):
    code = "```python\nresult = compute_the_quarterly_revenue_forecast(region='emea', include_returns=True)\n```\n"
    llm.script(Reply(text=f"## Checks\n\n{WIDE_TABLE}\n{code}", chunk_chars=40))
    open_chat(on_a_phone(page), conversation)
    page.get_by_label("Message", exact=True).fill("Show the checks")
    page.keyboard.press("Enter")
    answer = page.locator('.msg-assistant[data-status="complete"] .markdown')
    expect(answer.locator("table tbody tr")).to_have_count(2)

    # Words and numbers stay whole: every cell is one line, and the table scrolls in its frame instead.
    broken = answer.locator("td, th").evaluate_all(
        """cells => cells.filter(cell => {
            const range = document.createRange();
            range.selectNodeContents(cell);
            const lines = new Set(Array.from(range.getClientRects(), rect => Math.round(rect.top)));
            return lines.size > 1 && !cell.textContent.includes(" ");
        }).map(cell => cell.textContent)"""
    )
    assert broken == [], broken
    for frame in [answer.locator(".table-scroll"), answer.locator("pre")]:
        expect(frame).to_have_attribute("tabindex", "0")
        assert frame.evaluate("node => node.scrollWidth > node.clientWidth"), "it scrolls sideways"
    assert page.evaluate("() => document.documentElement.scrollWidth") <= PHONE["width"]
    answer.locator(".table-scroll").focus()
    page.keyboard.press("ArrowRight")
    page.wait_for_function("() => document.querySelector('.table-scroll').scrollLeft > 0")
    screenshot(page, "phone-table-and-code")


def test_file_names_can_be_read_on_a_phone(page, signed_in, conversation, llm):
    llm.script(Reply(text="Got it."))
    open_chat(on_a_phone(page), conversation)
    name = "quarterly-revenue-forecast-2026.csv"
    page.locator("#file-input").set_input_files(
        files=[
            {"name": "scanned-contract-final.pdf", "mimeType": "application/pdf", "buffer": b"%PDF-1.4 not really"},
            {"name": name, "mimeType": "text/csv", "buffer": b"a,b\n1,2\n"},
        ]
    )
    broken, chip = page.locator("#attachments .chip").all()
    expect(broken).to_have_class("chip failed")
    expect(chip.locator(".chip-status")).to_have_text("ready")
    screenshot(page, "phone-upload-chips")
    for shown in [broken, chip]:
        assert shown.locator(".chip-name").evaluate("node => node.getBoundingClientRect().width") > 150
    page.get_by_label("Message", exact=True).fill("Read this")
    page.keyboard.press("Enter")
    sent = page.locator(".msg-user .chip-name")
    expect(sent).to_have_text(name)
    assert sent.evaluate("node => node.getBoundingClientRect().width") > 150
    screenshot(page, "phone-file-chips")


# The message box, then 24 conversations a row each.
LIST_HEIGHT = 2300


def test_the_list_of_conversations_is_compact(page, signed_in):
    for n in range(24):
        services.conversation_create(owner=signed_in, title=f"Conversation number {n} about the quarterly budget")
    on_a_phone(page).goto("/")
    rows = page.locator(".conversation-row")
    expect(rows).to_have_count(24)
    height = page.evaluate("() => document.documentElement.scrollHeight")
    assert height < LIST_HEIGHT, height
    assert page.evaluate("() => document.documentElement.scrollWidth") <= PHONE["width"]
    row = rows.first
    expect(row.get_by_role("button", name="Archive")).to_be_in_viewport()
    assert title_width(row) > 0.8 * PHONE["width"]  # the title has the row to itself, not what the buttons leave
    row.get_by_text("Rename").click()
    form = row.locator(".rename-form")
    box = form.bounding_box()
    assert box and box["x"] >= 0 and box["x"] + box["width"] <= PHONE["width"], box
    screenshot(page, "phone-list")

    # In Russian, whose words are longer, too.
    page.get_by_role("button", name="Русский").click()
    expect(page.get_by_role("button", name="Выйти")).to_be_in_viewport()
    assert page.evaluate("() => document.documentElement.scrollHeight") < LIST_HEIGHT
    assert page.evaluate("() => document.documentElement.scrollWidth") <= PHONE["width"]
    assert title_width(rows.first) > 0.8 * PHONE["width"]
    screenshot(page, "phone-list-russian")


def title_width(row) -> float:
    return row.locator(".title").evaluate("node => node.getBoundingClientRect().width")


def test_the_end_of_the_conversation_stays_in_view_when_the_page_gets_shorter(page, signed_in, conversation):
    for number in range(1, 13):
        services.message_append(conversation=conversation, role="user", content=f"Question {number}")
        services.message_append(conversation=conversation, role="assistant", content=f"Answer {number}\n\n" * 4)
    open_chat(on_a_phone(page), conversation)
    last = page.locator("#messages > .msg-assistant").last
    expect(last).to_be_in_viewport()

    # A phone's keyboard opening takes the lower part of the screen.
    page.set_viewport_size({"width": 390, "height": 500})
    expect(last).to_be_in_viewport(ratio=1)

    # Who has scrolled back to read stays where they are.
    first = page.locator("#messages > .msg-user").first
    first.scroll_into_view_if_needed()
    page.set_viewport_size(PHONE)
    page.set_viewport_size({"width": 390, "height": 500})
    expect(first).to_be_in_viewport()
    expect(last).not_to_be_in_viewport()
