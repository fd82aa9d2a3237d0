"""axe-core on every kind of page, in both themes, on a desktop and at 390 px: no critical or serious violation.

axe-core comes inside the axe-playwright-python package (nothing is downloaded); the lesser findings are printed
for whoever runs the tests with -s.
"""

from __future__ import annotations

import contextlib
import uuid
from datetime import timedelta

import pytest
from axe_playwright_python.sync_playwright import Axe
from django.apps import apps
from django.contrib import admin
from django.contrib.auth import get_user_model
from django.contrib.auth.hashers import PBKDF2PasswordHasher
from django.contrib.auth.models import Group
from django.test import Client
from django.urls import NoReverseMatch, reverse
from django.utils import timezone
from playwright.sync_api import expect

from conversations import services
from conversations.models import Attachment, PendingConfirmation, TokenUsage, ToolJob
from conversations.tasks import run_tool_job
from tests.fake_provider import Reply
from tools.dashboards import demo
from tools.dashboards.models import Migration

from .conftest import PASSWORD, screenshot, streamed
from .test_chat import open_chat

BLOCKING = {"critical", "serious"}
SIZES = {"desktop": {"width": 1280, "height": 800}, "phone": {"width": 390, "height": 844}}
THEMES = ["light", "dark"]
# Each theme once, each in one size: for a state that shows what an earlier one showed in every look, and again
# (reloaded, a group opened, a notice added).
BOTH_THEMES = [("light", "desktop"), ("dark", "phone")]

ANSWER = (
    "## Result\n\nThe **Sales** dashboard has `2` failing checks; see [the runbook](https://example.com/runbook).\n\n"
    "| dashboard | status | errors |\n| --- | :---: | ---: |\n| Sales | failing | 12 |\n| Churn | ok | 0 |\n\n"
    "```python\nfor check in checks:\n"
    "    print(check.name, check.status, check.errors, check.last_run_at, check.owner)\n```\n\n"
    "1. Fix the freshness check.\n2. Run it again.\n"
)

# axe is put into a page once, not before every look; only what is read comes back (its whole report is about a
# hundred kilobytes): a third of each audit's time.
AXE_SCRIPT = Axe().axe_script
AXE_RUN = """async (context) => {
    const report = await axe.run(context ?? document, {resultTypes: ["violations"]});
    return report.violations.map(({id, impact, help, nodes}) => ({
        id, impact, help, targets: nodes.map((node) => node.target.join(", ")),
    }));
}"""
# Some colours change with a transition (the admin's links and buttons): the page is read once they have ended, as a
# person sees it, not halfway from one theme to the other.
TRANSITIONS_ENDED = """() => Promise.all(document.getAnimations()
    .filter((animation) => animation instanceof CSSTransition)
    .map((animation) => animation.finished.catch(() => null)))"""


def violations(page, where: str, looks: list[tuple[str, str]] | None = None, context: dict | None = None) -> list[str]:
    """The blocking violations of `page` (or of the part `context` selects) in each (theme, size) of `looks`, by
    default every theme in every size; the others are printed."""
    found = []
    for theme, size in looks or [(theme, size) for theme in THEMES for size in SIZES]:
        page.emulate_media(color_scheme=theme)
        page.set_viewport_size(SIZES[size])
        page.evaluate(TRANSITIONS_ENDED)
        if not page.evaluate("() => 'axe' in window"):
            page.evaluate(AXE_SCRIPT)
        for violation in page.evaluate(AXE_RUN, context):
            line = f"{where} ({theme}, {size}): {violation['id']} [{violation['impact']}] {violation['help']}"
            line = f"{line}: {violation['targets']}"
            print(line)
            if violation["impact"] in BLOCKING:
                found.append(line)
    page.emulate_media(color_scheme="light")
    page.set_viewport_size(SIZES["desktop"])
    return found


def ask(page, text: str) -> None:
    page.get_by_label("Message", exact=True).fill(text)
    page.keyboard.press("Enter")


def test_the_audit_reports_what_it_is_there_to_find(page, server, transactional_db):
    page.goto("/accounts/login/")
    page.evaluate("""() => {
        const faint = Object.assign(document.createElement("p"), {id: "faint", textContent: "Barely there"});
        faint.style.cssText = "color: #eee; background: #fff";
        document.querySelector("main").append(faint);
    }""")
    found = violations(page, "sign-in, a faint line added", [("light", "desktop")])
    assert found == [
        "sign-in, a faint line added (light, desktop): color-contrast [serious] Elements must meet "
        "minimum color contrast ratio thresholds: ['#faint']"
    ]


def test_sign_in(page, server, transactional_db):
    page.goto("/accounts/login/")
    expect(page.get_by_role("heading", name="Sign in")).to_be_visible()
    assert violations(page, "sign-in") == []
    page.get_by_label("Username").fill("nobody")
    page.get_by_label("Password").fill("wrong")
    page.get_by_role("button", name="Sign in").click()
    expect(page.get_by_role("alert")).to_be_visible()
    assert violations(page, "sign-in refused", BOTH_THEMES) == []


def test_the_conversation_list(page, signed_in):
    for title in ["Quarterly revenue", "Churn analysis", "Team offsite"]:
        services.conversation_create(owner=signed_in, title=title)
    page.goto("/")
    expect(page.locator(".conversation-row")).to_have_count(3)
    assert violations(page, "list") == []
    page.goto("/?q=nothing-matches")
    assert violations(page, "list, no match", BOTH_THEMES) == []


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
    assert violations(page, "chat with a group of calls opened", BOTH_THEMES) == []
    page.reload()
    expect(page.locator("#send")).to_be_enabled()
    assert violations(page, "chat, reloaded", BOTH_THEMES) == []


def test_the_chat_while_an_answer_streams(page, signed_in, conversation, llm):
    plan = "Here is **the plan**:\n\n- first step\n- second step\n" * 4
    llm.script(Reply(text=plan, chunk_chars=8, stall=30, stall_after=6))
    open_chat(page, conversation)
    ask(page, "Make a plan")
    streamed(page, 20)
    assert violations(page, "streaming") == []
    page.get_by_role("button", name="Stop").click()
    expect(page.locator(".msg-assistant")).to_have_attribute("data-status", "interrupted")
    assert violations(page, "stopped", BOTH_THEMES) == []


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
    assert violations(page, "error notice", BOTH_THEMES) == []


def test_the_chat_with_previous_versions_open(page, signed_in, conversation, llm):
    llm.script(
        Reply(text="Let me look.", tool_calls=[("browser_lookup", {"query": "sales"}, "call_old")]),
        Reply(text=ANSWER),
        Reply(text="The **Sales** dashboard is fine."),
    )
    open_chat(page, conversation)
    ask(page, "Which checks fail?")
    expect(page.locator('.msg-assistant[data-status="complete"] .code-block')).to_be_visible()
    page.get_by_role("button", name="Regenerate the answer").click()
    summary = page.get_by_text("Previous version (1)")
    expect(summary).to_be_visible()
    assert violations(page, "previous versions, closed") == []
    summary.click()
    expect(page.locator(".version .code-block")).to_be_visible()
    assert violations(page, "previous versions, open", BOTH_THEMES) == []
    page.reload()
    page.get_by_text("Previous version (1)").click()
    expect(page.locator('.version .tool-card[data-tool-call-id="call_old"]')).to_be_visible()
    assert violations(page, "previous versions, open after a reload", BOTH_THEMES) == []


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


def admin_rows(owner):
    """A row of every kind the admin shows: a conversation with a tool call, confirmations waiting and decided, a
    background job and its task, a file, a day's tokens, their audit events, the demo catalogue, a group and a
    refused sign-in."""
    conversation = services.conversation_create(owner=owner, title="Deploy Sales")
    services.message_append(conversation=conversation, role="user", content="Deploy Sales to production")
    services.message_append(
        conversation=conversation,
        role="assistant",
        tool_calls=[{"id": "c1", "name": "deploy_dashboard", "args": {"dashboard_id": 42}}],
    )
    services.message_append(
        conversation=conversation,
        role="tool",
        content='{"deployed": true}',
        tool_call_id="c1",
        tool_name="deploy_dashboard",
        outcome="rejected",
    )
    services.conversation_archive(conversation=services.conversation_create(owner=owner, title="Old"), actor=owner)
    soon, now = timezone.now() + timedelta(hours=1), timezone.now()
    for status, decided in [("pending", None), ("edited", owner), ("rejected", owner)]:
        PendingConfirmation.objects.create(
            conversation=conversation,
            tool_call_id=f"call_{status}",
            tool_name="deploy_dashboard",
            args={"dashboard_id": 42, "environment": "production"},
            edited_args={"dashboard_id": 42, "environment": "staging"} if status == "edited" else None,
            args_hash="x",
            status=status,
            decided_by=decided,
            decided_at=now if decided else None,
            reason="not today" if status == "rejected" else "",
            expires_at=soon,
        )
    job = ToolJob.objects.create(
        conversation=conversation, user=owner, run_id=uuid.uuid4(), tool_call_id="c2", tool_name="slow_report"
    )
    run_tool_job.enqueue(str(job.pk), job.attempt)  # no worker runs here: it stays queued
    Attachment.objects.create(
        conversation=conversation,
        owner=owner,
        file="attachments/report.pdf",
        original_name="report.pdf",
        kind="pdf",
        size=2048,
        parse_status="parsed",
    )
    TokenUsage.objects.create(
        user=owner, day=timezone.localdate(), prompt_tokens=1200, completion_tokens=300, answers=2
    )
    demo.load()
    Group.objects.create(name="Analysts")
    Client().post(reverse("login"), {"username": owner.get_username(), "password": "wrong"})  # axes records it
    return conversation


def admin_models() -> list[str]:
    return sorted(model._meta.label for model in apps.get_models() if admin.site.is_registered(model))


def admin_pages(label: str) -> list[tuple[str, str]]:
    """The admin's pages of the model `label`: its list, and the page of its first row when rows have pages."""
    model = apps.get_model(label)
    name = f"admin:{model._meta.app_label}_{model._meta.model_name}"
    pages = [(f"admin {label} list", reverse(f"{name}_changelist"))]
    first = model.objects.order_by("pk").first() if model._meta.managed else None
    with contextlib.suppress(AttributeError, NoReverseMatch):  # no rows, or no page per row (the registered tools)
        pages.append((f"admin {label} change", reverse(f"{name}_change", args=[first.pk])))
    return pages


def admin_signed_in(page, server):
    root = get_user_model().objects.create_superuser("root", "root@example.com")  # signed in by cookie: no password
    client = Client()
    client.force_login(root)
    page.context.add_cookies(
        [{"name": "sessionid", "value": client.cookies["sessionid"].value, "url": server.http_url}]
    )
    return root


# A list's rows repeat one template: the first three are read, not the demo catalogue's 64 (a second each).
ADMIN_PAGE = {"exclude": ["#result_list tbody tr:nth-child(n+4)"]}


@pytest.mark.parametrize("label", admin_models())
def test_the_admin_pages(page, server, transactional_db, label):
    admin_rows(admin_signed_in(page, server))
    found = []
    for number, (where, url) in enumerate(admin_pages(label)):
        page.goto(url)
        expect(page.locator("#site-name")).to_be_visible()
        # The admin's pages share their styles and layout: each page in one of the looks, the next in the other.
        found += violations(page, where, [BOTH_THEMES[number % 2]], ADMIN_PAGE)
    assert found == []


def test_the_admin_at_work(page, server, transactional_db):
    admin_rows(admin_signed_in(page, server))
    page.goto(reverse("admin:conversations_pendingconfirmation_changelist"))
    page.locator('details[data-filter-title="status"]').get_by_role("link", name="All", exact=True).click()
    expect(page.locator("#result_list tbody tr")).to_have_count(3)
    found = violations(page, "admin confirmations, all", BOTH_THEMES)

    page.goto(reverse("admin:conversations_conversation_changelist"))
    page.locator("#result_list .action-select").first.check()
    page.get_by_label("Action:").select_option("archive")
    expect(page.locator(".actions .action-counter")).to_contain_text("1 of 2 selected")
    found += violations(page, "admin conversations, one selected", BOTH_THEMES)
    page.get_by_role("button", name="Go").click()
    expect(page.locator(".messagelist .success")).to_be_visible()
    found += violations(page, "admin conversations, one archived", BOTH_THEMES)

    page.goto(reverse("admin:dashboards_dashboard_change", args=[42]))
    page.get_by_label("Title:").fill("")
    page.get_by_role("button", name="Save", exact=True).click()
    expect(page.locator(".errornote")).to_be_visible()
    found += violations(page, "admin dashboard refused", BOTH_THEMES)
    page.emulate_media(color_scheme="dark")
    screenshot(page, "admin-dark-dashboard-refused")
    page.goto(reverse("admin:dashboards_migration_change", args=[Migration.objects.order_by("pk").first().pk]))
    page.set_viewport_size(SIZES["phone"])
    screenshot(page, "admin-dark-phone-migration")
    assert found == []
