"""Nothing the model or a person wrote can run script in the page."""

from __future__ import annotations

from playwright.sync_api import expect

from tests.fake_provider import Reply

from .test_chat import open_chat

HOSTILE = (
    "Look: <script>window.__xss = 'script'</script>\n\n"
    '<img src="x" onerror="window.__xss = \'img\'">\n\n'
    "[click me](javascript:window.__xss='link') and **bold** text\n\n"
    "<iframe src=\"javascript:window.__xss='iframe'\"></iframe>"
)


def no_script_ran(page) -> None:
    assert page.evaluate("() => window.__xss") is None
    assert page.locator(".messages script, .messages img, .messages iframe").count() == 0
    for href in page.locator(".messages a").evaluate_all("links => links.map(link => link.getAttribute('href'))"):
        assert href is None or not href.lower().startswith("javascript"), href


def test_script_in_a_model_answer_and_a_user_message_is_inert(page, signed_in, conversation, llm):
    llm.script(
        Reply(
            text=HOSTILE,
            chunk_chars=7,
            interval=0.01,
            tool_calls=[("browser_lookup", {"query": "<img src=x onerror=\"window.__xss='tool'\">"}, "call_x")],
        ),
        Reply(text=HOSTILE),
    )
    page.on("dialog", lambda dialog: dialog.dismiss())
    open_chat(page, conversation)
    page.get_by_label("Message", exact=True).fill("<script>window.__xss='user'</script><b onmouseover=\"x()\">hi</b>")
    page.keyboard.press("Enter")

    expect(page.locator('.msg-assistant[data-status="complete"]')).to_have_count(2)
    expect(page.locator('.tool-card[data-tool-call-id="call_x"]')).to_have_attribute("data-state", "ok")
    page.locator(".messages").hover()
    no_script_ran(page)
    # The markup is shown as text, and Markdown still works around it.
    expect(page.locator(".msg-user .msg-text")).to_contain_text("<script>window.__xss='user'</script>")
    expect(page.locator(".msg-assistant").first).to_contain_text("<script>window.__xss = 'script'</script>")
    expect(page.locator(".msg-assistant").first.locator("strong")).to_have_text("bold")

    # The server's rendering of the same history is just as inert.
    page.reload()
    expect(page.locator("#send")).to_be_enabled()
    no_script_ran(page)
    expect(page.locator(".msg-assistant").first).to_contain_text('<img src="x" onerror=')
