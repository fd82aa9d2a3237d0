"""axe-core on every kind of page, in both themes, on a desktop and at 390 px: no critical or serious violation.

axe-core comes inside the axe-playwright-python package (nothing is downloaded); the lesser findings are printed
for whoever runs the tests with -s.
"""

from __future__ import annotations

from axe_playwright_python.sync_playwright import Axe
from django.contrib.auth import get_user_model
from django.contrib.auth.hashers import PBKDF2PasswordHasher
from playwright.sync_api import expect

from conversations import services
from tests.fake_provider import Reply

from .conftest import PASSWORD, streamed
from .test_chat import open_chat

BLOCKING = {"critical", "serious"}
SIZES = {"desktop": {"width": 1280, "height": 800}, "phone": {"width": 390, "height": 844}}
THEMES = ["light", "dark"]

ANSWER = (
    "## Result\n\nThe **Sales** dashboard has `2` failing checks; see [the runbook](https://example.com/runbook).\n\n"
    "| dashboard | status | errors |\n| --- | :---: | ---: |\n| Sales | failing | 12 |\n| Churn | ok | 0 |\n\n"
    "```python\nfor check in checks:\n"
    "    print(check.name, check.status, check.errors, check.last_run_at, check.owner)\n```\n\n"
    "1. Fix the freshness check.\n2. Run it again.\n"
)

axe = Axe()


def violations(page, where: str) -> list[str]:
    """The blocking violations of `page` in each theme and size; the others are printed."""
    found = []
    for theme in THEMES:
        page.emulate_media(color_scheme=theme)
        for size, viewport in SIZES.items():
            page.set_viewport_size(viewport)
            for violation in axe.run(page).response["violations"]:
                targets = [", ".join(node["target"]) for node in violation["nodes"]]
                line = f"{where} ({theme}, {size}): {violation['id']} [{violation['impact']}] {violation['help']}"
                line = f"{line}: {targets}"
                print(line)
                if violation["impact"] in BLOCKING:
                    found.append(line)
    page.emulate_media(color_scheme="light")
    page.set_viewport_size(SIZES["desktop"])
    return found


def ask(page, text: str) -> None:
    page.get_by_label("Message", exact=True).fill(text)
    page.keyboard.press("Enter")


def test_sign_in(page, server, transactional_db):
    page.goto("/accounts/login/")
    expect(page.get_by_role("heading", name="Sign in")).to_be_visible()
    assert violations(page, "sign-in") == []
    page.get_by_label("Username").fill("nobody")
    page.get_by_label("Password").fill("wrong")
    page.get_by_role("button", name="Sign in").click()
    expect(page.get_by_role("alert")).to_be_visible()
    assert violations(page, "sign-in refused") == []


def test_the_conversation_list(page, signed_in):
    for title in ["Quarterly revenue", "Churn analysis", "Team offsite"]:
        services.conversation_create(owner=signed_in, title=title)
    page.goto("/")
    expect(page.locator(".conversation-row")).to_have_count(3)
    assert violations(page, "list") == []
    page.goto("/?q=nothing-matches")
    assert violations(page, "list, no match") == []


def test_the_chat_idle_with_markdown_and_tool_cards(page, signed_in, conversation, llm):
    llm.script(
        Reply(text="Let me look.", tool_calls=[("browser_lookup", {"query": "sales"}, "call_ok")]),
        Reply(tool_calls=[("browser_fail", {"query": "churn"}, "call_fail")]),
        *[Reply(tool_calls=[("browser_lookup", {"query": f"q{n}"}, f"call_{n}")]) for n in range(3)],
        Reply(text=ANSWER),
    )
    open_chat(page, conversation)
    assert violations(page, "empty chat") == []
    ask(page, "Which checks fail?")
    expect(page.locator('.msg-assistant[data-status="complete"] .code-block')).to_be_visible()
    expect(page.locator('.tool-card[data-state="error"]')).to_be_visible()
    page.locator('.tool-card[data-tool-call-id="call_ok"]').get_by_text("Output").click()
    assert violations(page, "chat with tool cards") == []
    page.get_by_role("button", name="browser_lookup 3 calls Done").click()
    expect(page.locator('.tool-card[data-tool-call-id="call_2"]')).to_be_visible()
    assert violations(page, "chat with a group of calls opened") == []
    page.reload()
    expect(page.locator("#send")).to_be_enabled()
    assert violations(page, "chat, reloaded") == []


def test_the_chat_while_an_answer_streams(page, signed_in, conversation, llm):
    plan = "Here is **the plan**:\n\n- first step\n- second step\n" * 4
    llm.script(Reply(text=plan, chunk_chars=8, stall=30, stall_after=6))
    open_chat(page, conversation)
    ask(page, "Make a plan")
    streamed(page, 20)
    assert violations(page, "streaming") == []
    page.get_by_role("button", name="Stop").click()
    expect(page.locator(".msg-assistant")).to_have_attribute("data-status", "interrupted")
    assert violations(page, "stopped") == []


def test_the_chat_with_an_approval_card(page, signed_in, conversation, llm):
    llm.script(Reply(tool_calls=[("browser_deploy", {"dashboard": "Sales", "environment": "production"}, "call_dep")]))
    open_chat(page, conversation)
    ask(page, "Deploy Sales")
    expect(page.get_by_role("button", name="Approve")).to_be_visible()
    assert violations(page, "approval card") == []


def test_the_chat_with_an_error(page, signed_in, conversation, llm):
    llm.script(Reply(status=401))
    open_chat(page, conversation)
    ask(page, "Hello?")
    expect(page.locator('.msg-assistant[data-status="failed"] .msg-status')).to_be_visible()
    assert violations(page, "failed answer") == []
    page.locator("#file-input").set_input_files(
        files=[{"name": "virus.exe", "mimeType": "application/octet-stream", "buffer": b"MZ"}]
    )
    expect(page.locator("#notices .notice-error")).to_be_visible()
    assert violations(page, "error notice") == []


def superuser():
    """A superuser who signs in with PASSWORD, checked by the server's own hashers (not the tests' MD5)."""
    user = get_user_model().objects.create_superuser("root", "root@example.com")
    user.password = PBKDF2PasswordHasher().encode(PASSWORD, PBKDF2PasswordHasher().salt())
    user.save(update_fields=["password"])
    return user


def test_the_admin_index(page, server, transactional_db):
    superuser()
    page.goto("/accounts/login/?next=/admin/")
    page.get_by_label("Username").fill("root")
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Sign in").click()
    expect(page.locator("#site-name")).to_be_visible()
    assert violations(page, "admin") == []
