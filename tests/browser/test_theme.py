"""Light and dark: the system's choice unless the top bar's switch says otherwise, remembered, and followed by the
admin too."""

from __future__ import annotations

import re

from playwright.sync_api import expect

from tests.fake_provider import Reply

from .conftest import PASSWORD, screenshot
from .test_accessibility import superuser
from .test_chat import open_chat

BACKGROUND = "() => getComputedStyle(document.documentElement).backgroundColor"
LIGHT_BACKGROUND = "rgb(244, 245, 247)"
DARK_BACKGROUND = "rgb(14, 16, 20)"

ANSWER = (
    "## Checks\n\nThe **Sales** dashboard has `2` failing checks:\n\n"
    "| check | status | errors |\n| --- | :---: | ---: |\n| freshness | failing | 12 |\n| schema | ok | 0 |\n\n"
    "```python\ndef failing(checks):\n    # the ones to fix first\n"
    "    return [c for c in checks if c.errors > 0]\n```\n\n"
    "> Fix the freshness check first.\n"
)


def test_the_page_follows_the_system_until_the_switch_says_otherwise(page, signed_in, conversation):
    page.emulate_media(color_scheme="dark")
    open_chat(page, conversation)
    switch = page.get_by_role("group", name="Theme")
    expect(switch.get_by_role("button", name="As the system")).to_have_attribute("aria-pressed", "true")
    assert page.evaluate(BACKGROUND) == DARK_BACKGROUND

    switch.get_by_role("button", name="Light").click()
    expect(switch.get_by_role("button", name="Light")).to_have_attribute("aria-pressed", "true")
    assert page.evaluate(BACKGROUND) == LIGHT_BACKGROUND

    # Remembered on the next page, and set before the page is drawn: the script that applies it is the first in
    # <head>, a plain one that runs before the stylesheet is used.
    page.goto("/")
    expect(page.get_by_role("group", name="Theme").get_by_role("button", name="Light")).to_have_attribute(
        "aria-pressed", "true"
    )
    assert page.evaluate(BACKGROUND) == LIGHT_BACKGROUND
    first = page.evaluate(
        "() => { const s = document.head.querySelector('script'); return [s.src, s.type, s.defer, s.async]; }"
    )
    assert first[0].endswith("/static/js/theme.js") and first[1:] == ["", False, False], first

    page.get_by_role("button", name="Dark").click()
    assert page.evaluate(BACKGROUND) == DARK_BACKGROUND
    page.emulate_media(color_scheme="light")
    assert page.evaluate(BACKGROUND) == DARK_BACKGROUND, "a chosen theme does not follow the system"
    page.get_by_role("button", name="As the system").click()
    assert page.evaluate(BACKGROUND) == LIGHT_BACKGROUND


def test_answers_read_well_in_both_themes(page, signed_in, conversation, llm):
    llm.script(
        Reply(text="Let me look.", tool_calls=[("browser_lookup", {"query": "sales"}, "call_dark")]),
        Reply(text=ANSWER),
    )
    open_chat(page, conversation)
    page.get_by_label("Message", exact=True).fill("Which checks fail on Sales?")
    page.keyboard.press("Enter")
    answer = page.locator('.msg-assistant[data-status="complete"]').last
    expect(answer.locator(".code-lang")).to_have_text("python")
    keyword = answer.locator("pre .k").first
    colours = {}
    for theme in ["light", "dark"]:
        page.emulate_media(color_scheme=theme)
        colours[theme] = (keyword.evaluate("node => getComputedStyle(node).color"), page.evaluate(BACKGROUND))
        screenshot(page, f"answer-{theme}")
        page.set_viewport_size({"width": 390, "height": 844})
        answer.scroll_into_view_if_needed()
        screenshot(page, f"answer-{theme}-phone")
        page.set_viewport_size({"width": 1280, "height": 800})
    assert colours["light"] != colours["dark"]
    assert len({colour for pair in colours.values() for colour in pair}) == 4


def test_the_admin_follows_the_same_choice(page, server, transactional_db):
    superuser()
    page.goto("/accounts/login/")
    page.get_by_role("button", name="Dark").click()
    page.get_by_label("Username").fill("root")
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Sign in").click()
    expect(page).not_to_have_url(re.compile("/accounts/login/"))
    page.goto("/admin/")
    expect(page.get_by_role("heading", name="Site administration")).to_be_visible()
    expect(page.locator("html")).to_have_attribute("data-theme", "dark")
    screenshot(page, "admin-dark")
