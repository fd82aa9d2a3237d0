"""Answers as Markdown: drawn as they stream, then the server's sanitized rendering; code blocks with their
language and Copy; nothing the model writes ever becomes markup; and what drawing a growing answer costs."""

from __future__ import annotations

from playwright.sync_api import expect

from tests.fake_provider import Reply

from .conftest import screenshot
from .test_chat import open_chat

ANSWER = (
    "## Sales checks\n\nTwo checks **fail**; the `freshness` one matters most.\n\n"
    "| check | status | errors |\n| --- | :---: | ---: |\n| freshness | failing | 12 |\n| schema | ok | 0 |\n\n"
    "```python\ndef failing(checks):\n    return [c for c in checks if c.errors > 0]\n```\n\n"
    "1. Fix the freshness check.\n2. Run the checks again.\n\nSee [the runbook](https://example.com/runbook).\n"
)
STREAMING = '.msg-assistant[data-status="streaming"] .msg-body'
DONE = '.msg-assistant[data-status="complete"] .msg-body'


def ask(page, text: str) -> None:
    page.get_by_label("Message", exact=True).fill(text)
    page.keyboard.press("Enter")


def test_markdown_is_drawn_while_it_streams_then_the_server_rendering_takes_over(page, signed_in, conversation, llm):
    # The stream pauses before its last paragraph, so that what it drew so far can be looked at.
    pause_after = ANSWER.index("\n\nSee") // 6 + 1
    llm.script(Reply(text=ANSWER, chunk_chars=6, interval=0.01, stall=3, stall_after=pause_after))
    open_chat(page, conversation)
    ask(page, "Which checks fail?")

    streaming = page.locator(STREAMING)
    expect(streaming.get_by_role("heading", name="Sales checks")).to_be_visible()
    expect(streaming.locator("strong")).to_have_text("fail")
    expect(streaming.locator("table tbody tr")).to_have_count(2)
    expect(streaming.locator(".code-lang")).to_have_text("python")
    expect(streaming.get_by_role("button", name="Copy code")).to_be_visible()
    assert "|" not in streaming.locator(".table-scroll").text_content()
    expect(streaming.locator("ol li")).to_have_count(2)
    screenshot(page, "markdown-streaming")

    done = page.locator(DONE)
    expect(done.get_by_role("link", name="the runbook")).to_have_attribute("href", "https://example.com/runbook")
    expect(done.locator("table tbody tr")).to_have_count(2)
    expect(done.locator("pre .k").first).to_have_text("def")  # coloured on the server
    expect(done.locator(".code-lang")).to_have_text("python")
    expect(done.locator(".caret")).to_have_count(0)
    assert "**" not in done.text_content() and "```" not in done.text_content()


def test_nothing_the_model_writes_becomes_markup_while_it_streams(page, signed_in, conversation, llm):
    hostile = (
        'Look: <img src=x onerror="document.title=\'owned\'"> <script>document.title="owned"</script>\n\n'
        "[click](javascript:document.title='owned') [data](data:text/html;base64,PHNjcmlwdD4=) "
        "<javascript:alert(1)> **bold <b onmouseover=alert(1)>x</b>**\n\n| a |\n| - |\n| <svg onload=alert(1)> |\n"
    )
    dialogs = []
    page.on("dialog", lambda dialog: (dialogs.append(dialog.message), dialog.dismiss()))
    pause_after = hostile.index("\n\n| a") // 4 + 1
    llm.script(Reply(text=hostile, chunk_chars=4, interval=0.01, stall=2, stall_after=pause_after))
    open_chat(page, conversation)
    ask(page, "Say something nasty")
    for selector in [STREAMING, DONE]:
        body = page.locator(selector)
        expect(body.locator("strong")).to_be_visible()
        assert body.locator("img, script, svg, b, iframe").count() == 0
        hrefs = body.locator("a").evaluate_all("links => links.map(link => link.getAttribute('href'))")
        assert all(href.startswith(("https:", "http:")) for href in hrefs), hrefs
    expect(page.locator(DONE)).to_contain_text("<img src=x onerror=")
    assert page.title() != "owned" and dialogs == []


def test_copy_code_puts_the_code_on_the_clipboard(page, context, signed_in, conversation, llm, server):
    context.grant_permissions(["clipboard-read", "clipboard-write"], origin=server.http_url)
    llm.script(Reply(text="Run this:\n\n```bash\nmake test\n```\n"))
    open_chat(page, conversation)
    ask(page, "How do I test?")
    block = page.locator(DONE).locator(".code-block")
    expect(block.locator(".code-lang")).to_have_text("bash")
    expect(block.locator("pre")).to_have_attribute("tabindex", "0")
    block.get_by_role("button", name="Copy code").click()
    expect(block.get_by_role("button", name="Copied")).to_be_visible()
    assert page.evaluate("navigator.clipboard.readText()") == "make test\n"

    # The whole answer's Copy takes its words and code, not the block's label and button.
    page.locator(".msg-assistant").get_by_role("button", name="Copy", exact=True).click()
    assert page.evaluate("navigator.clipboard.readText()").split() == ["Run", "this:", "make", "test"]


def test_what_drawing_a_growing_answer_costs(page, signed_in, conversation):
    """A 5,000-character answer drawn again at every token batch of 50 characters, as at each animation frame:
    printed (run with -s), and held to a bound far above it that only a slower way of drawing would pass."""
    open_chat(page, conversation)
    figures = page.evaluate(
        """async (answer) => {
            const { draw } = await import("/static/js/chat/streaming.js");
            const text = answer.repeat(Math.ceil(5000 / answer.length)).slice(0, 5000);
            const measure = (reuse) => {
                const times = [];
                let body = null;
                for (let end = 50; end <= text.length; end += 50) {
                    if (!reuse || !body) {
                        body?.remove();
                        body = document.createElement("div");
                        body.className = "msg-body markdown streaming";
                        document.getElementById("messages").append(body);
                    }
                    const started = performance.now();
                    draw(body, text.slice(0, end));
                    body.getBoundingClientRect(); // the layout it causes counts too
                    times.push(performance.now() - started);
                }
                body.remove();
                const last = times.slice(-20).sort((a, b) => a - b);
                return { median: last[10], worst: last[19] };
            };
            measure(true);
            return { kept: measure(true), redrawn: measure(false) };
        }""",
        ANSWER,
    )
    print(f"drawing a 5,000-character answer at each 50-character batch, in ms: {figures}")
    assert figures["kept"]["median"] < 50, figures
