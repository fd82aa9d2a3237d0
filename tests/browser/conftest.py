"""Browser tests: Debian's headless Chromium, driven by Playwright, against a real daphne with the fake provider.

One daphne process and one browser serve the whole session; each test gets a fresh browser context (its
own cookies), a fresh database (transactional tests: the server sees only committed rows) and an empty
script of provider replies. Each test leaves a screenshot in test-artifacts/screenshots/.

Playwright never downloads a browser here: it launches /usr/bin/chromium-headless-shell, Chromium's headless
build, which Playwright itself prefers for headless runs and which takes about a third less time here than the full
browser (`make test` installs Debian's `chromium-headless-shell` when it is missing; AGENTCHAT_CHROMIUM names
another); without it these tests are skipped with the reason.
"""

from __future__ import annotations

import os
import re
import time
from pathlib import Path

import pytest
from django.contrib.auth import get_user_model
from django.test import Client
from playwright.sync_api import expect

from conversations import services
from conversations.models import Conversation
from tests.fake_provider import FakeLLM
from tests.servers import BASE_DIR, DaphneProcess, _launch, server_env

CHROMIUM = os.environ.get("AGENTCHAT_CHROMIUM", "/usr/bin/chromium-headless-shell")
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-default-apps",
    "--disable-extensions",
    "--no-first-run",
    "--no-default-browser-check",
    "--metrics-recording-only",
    "--mute-audio",
]
SCREENSHOTS = BASE_DIR / "test-artifacts" / "screenshots"
# tests/browser/tools.py, named here and not imported: importing it would put its tools in this process's registry.
TOOLS_MODULE = "tests.browser.tools"
PASSWORD = "alice-browser-password"
TIMEOUT_MS = 10_000


expect.set_options(timeout=TIMEOUT_MS)


def pytest_collection_modifyitems(config, items):
    here = Path(__file__).parent
    for item in items:
        if Path(str(item.fspath)).is_relative_to(here) and not Path(CHROMIUM).exists():
            item.add_marker(pytest.mark.skip(reason=f"Chromium is not installed at {CHROMIUM}: make test installs it"))


class PageLog:
    """What a context's pages did, timed from the context's start: navigations, their sockets' frames and closes,
    and console messages. A failed test's report shows it beside the server's log, where a race shows."""

    LINES = 80

    def __init__(self, context):
        self.start = time.monotonic()
        self.lines: list[str] = []
        context.on("page", self.watch)

    def add(self, text: str) -> None:
        self.lines.append(f"{time.monotonic() - self.start:7.3f}s {text[:160]}")

    def watch(self, page) -> None:
        page.on("framenavigated", lambda frame: frame == page.main_frame and self.add(f"page at {frame.url}"))
        page.on("console", lambda message: self.add(f"console {message.type}: {message.text}"))
        page.on("websocket", self.socket)

    def socket(self, socket) -> None:
        self.add(f"socket to {socket.url}")
        socket.on("framesent", lambda payload: self.add(f"  sent {payload}"))
        socket.on("framereceived", lambda payload: self.add(f"  received {payload}"))
        socket.on("close", lambda _: self.add("  socket closed"))

    def text(self) -> str:
        return "\n".join(self.lines[-self.LINES :])


PAGE_LOG = pytest.StashKey[PageLog]()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item, call):
    """A failed browser test's report ends with what its pages did and what the server logged meanwhile."""
    report = yield
    if report.failed:
        if (pages := item.stash.get(PAGE_LOG, None)) is not None:
            report.sections.append(("pages", pages.text()))
        if isinstance(server := item.funcargs.get("server"), DaphneProcess):
            report.sections.append(("daphne log (last lines)", server.tail()))
    return report


@pytest.fixture(scope="package")
def browser_llm():
    with FakeLLM() as llm:
        yield llm


@pytest.fixture(scope="package")
def server(django_db_setup, django_db_blocker, browser_llm, tmp_path_factory):
    """One daphne process on the test database, answering with the fake provider and the test tools."""
    with django_db_blocker.unblock():
        env = server_env({"WS_MESSAGES_PER_MINUTE": "1000"}, llm=browser_llm)
    env.pop("DJANGO_ALLOW_ASYNC_UNSAFE", None)
    process = DaphneProcess(env, preload=[TOOLS_MODULE], log_dir=tmp_path_factory.mktemp("daphne"), name="browser")
    _launch([process], timeout=20)
    yield process
    process.stop()


@pytest.fixture(scope="package")
def playwright_instance():
    from playwright.sync_api import sync_playwright

    # Playwright's sync API keeps an event loop in this thread; Django's guard against the ORM in async
    # code would then refuse the tests' own database work. Only this process is affected: the server's
    # environment was taken without it (see `server`).
    os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"
    try:
        with sync_playwright() as playwright:
            yield playwright
    finally:
        del os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"]


@pytest.fixture(scope="package")
def browser(playwright_instance):
    browser = playwright_instance.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
    yield browser
    browser.close()


@pytest.fixture
def llm(browser_llm):
    """The session's fake provider with an empty script and no recorded requests."""
    with browser_llm._lock:
        browser_llm._replies.clear()
        browser_llm.requests.clear()
    yield browser_llm
    with browser_llm._lock:
        browser_llm._replies.clear()


@pytest.fixture
def alice(transactional_db):
    return get_user_model().objects.create_user("alice", "alice@example.com", PASSWORD)


@pytest.fixture
def context(browser, server, transactional_db, request):
    """A browser context (cookies of its own) whose pages talk to the test server; one screenshot at the end."""
    context = browser.new_context(base_url=server.http_url, viewport={"width": 1280, "height": 800}, locale="en-US")
    context.set_default_timeout(TIMEOUT_MS)
    request.node.stash[PAGE_LOG] = PageLog(context)
    yield context
    _wait_for_runs_to_end()
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    for index, page in enumerate(context.pages):
        if not page.is_closed():
            suffix = f"-{index + 1}" if index else ""
            page.screenshot(path=SCREENSHOTS / f"{_slug(request.node.name)}{suffix}.png", full_page=False)
    context.close()


@pytest.fixture
def page(context):
    return context.new_page()


@pytest.fixture
def signed_in(context, alice, server):
    """Alice's session cookie in the browser context, without going through the sign-in form."""
    client = Client()
    client.force_login(alice)
    cookie = client.cookies["sessionid"]
    context.add_cookies([{"name": "sessionid", "value": cookie.value, "url": server.http_url}])
    return alice


@pytest.fixture
def conversation(alice):
    return services.conversation_create(owner=alice)


STREAMING_TEXT = "() => document.querySelector('.msg-assistant[data-status=streaming] .msg-body')?.textContent || ''"


def streamed(page, at_least: int) -> str:
    """The answer streaming right now, once more than `at_least` characters of it are on the page."""
    page.wait_for_function(f"() => ({STREAMING_TEXT})().length > {at_least}")
    return page.evaluate(STREAMING_TEXT)


def _wait_for_runs_to_end(timeout: float = 10) -> None:
    """Runs still going when the test's rows are deleted would fail in the server and disturb the next test."""
    deadline = time.monotonic() + timeout
    waited = False
    while Conversation.objects.filter(active_run_id__isnull=False).exists() and time.monotonic() < deadline:
        waited = True
        time.sleep(0.05)
    if waited:
        time.sleep(0.3)  # the run's last writes (its audit event) come just after it frees the conversation


def screenshot(page, name: str) -> None:
    """An extra screenshot at an interesting moment of a test."""
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=SCREENSHOTS / f"{_slug(name)}.png")


def _slug(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", name).strip("-")
