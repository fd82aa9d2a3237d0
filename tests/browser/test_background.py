"""A slow tool as the page shows it: running in the background, through a reload, then the answer."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from tests.fake_provider import Reply
from tests.servers import start_worker

from .conftest import TOOLS_MODULE, screenshot
from .test_chat import open_chat


@pytest.fixture
def worker(transactional_db, tmp_path):
    process = start_worker(preload=[TOOLS_MODULE], log_dir=tmp_path)
    yield process
    process.stop()


def test_a_slow_tool_runs_in_the_background_and_the_answer_follows_a_reload(page, signed_in, conversation, llm, worker):
    llm.script(
        Reply(
            text="Compiling it.", tool_calls=[("browser_slow_report", {"query": "Sales", "seconds": 4}, "call_slow")]
        ),
        Reply(text="The Sales report is **ready**."),
    )
    open_chat(page, conversation)
    page.get_by_label("Message", exact=True).fill("Compile the Sales report")
    page.keyboard.press("Enter")

    card = page.locator('.tool-card[data-tool-call-id="call_slow"]')
    expect(card).to_have_attribute("data-state", "background")
    expect(card.locator(".tool-state")).to_have_text("Running in the background…")
    screenshot(page, "background-job-running")

    page.reload()
    expect(card).to_have_attribute("data-state", "background")
    expect(page.get_by_role("button", name="Stop")).to_be_visible()

    expect(card).to_have_attribute("data-state", "ok", timeout=15_000)
    card.get_by_text("Output").click()
    expect(card.locator(".tool-output pre")).to_contain_text('"pages": 12')
    expect(page.locator(".msg-assistant").last.locator("strong")).to_have_text("ready")
    expect(page.get_by_role("button", name="Stop")).to_be_hidden()
