"""The socket speaks the page's language: its language cookie, else Accept-Language, as LocaleMiddleware chooses.

Every sentence a person reads (an `error` frame's message, a notice's detail, how an answer ended) follows it; the
codes, what is stored and what the model reads stay English.
"""

from __future__ import annotations

import re

import pytest
from asgiref.sync import sync_to_async
from channels.testing import WebsocketCommunicator
from django.test import Client
from rest_framework_simplejwt.tokens import AccessToken

from agentchat.agent.context import truncate_message
from agentchat.asgi import application
from conversations import runs
from conversations.models import Message
from tests.fake_provider import Reply
from tools.registry import ToolArgs, ToolRegistry

from .conftest import TIMEOUT, Socket
from .helpers import of, one
from .test_answers import ask, error
from .test_auth_and_limits import expired_access

pytestmark = pytest.mark.django_db(transaction=True)

SLOW = 0.05
RUSSIAN = [(b"cookie", b"django_language=ru")]


class DeployArgs(ToolArgs):
    dashboard_id: int


@pytest.fixture
def tools(monkeypatch) -> ToolRegistry:
    registry = ToolRegistry()

    @registry.tool
    def lookup(args: DeployArgs, ctx) -> dict:
        """Look a dashboard up."""
        return {"found": args.dashboard_id}

    @registry.tool(requires_confirmation=True)
    def deploy_dashboard(args: DeployArgs, ctx) -> dict:
        """Deploy a dashboard."""
        return {"deployed": args.dashboard_id}

    monkeypatch.setattr(runs.manager, "registry", registry)
    return registry


@pytest.fixture
async def page_sockets():
    """Sockets opened as a page in a given language would open them (`headers`); each closed at the end."""
    opened: list[Socket] = []

    async def open_socket(conversation, user, headers=()) -> Socket:
        base = [(b"origin", b"http://localhost:8000"), (b"host", b"localhost:8000")]
        communicator = WebsocketCommunicator(application, f"/ws/chat/{conversation.pk}/", headers=[*base, *headers])
        connected, _ = await communicator.connect(timeout=TIMEOUT)
        assert connected
        socket = Socket(communicator)
        opened.append(socket)
        await socket.send({"type": "auth", "token": str(AccessToken.for_user(user))})
        assert (await socket.receive())["type"] == "ready"
        return socket

    yield open_socket
    for socket in opened:
        await socket.close()


@pytest.mark.parametrize(
    ("token", "said"),
    [
        pytest.param("not-a-jwt", "Токен недействителен. Войдите снова.", id="garbage"),
        pytest.param(expired_access, "Срок действия токена истёк. Войдите снова или обновите токен.", id="expired"),
    ],
)
async def test_a_refused_token_is_explained_in_russian(conversation, alice, token, said):
    headers = [(b"origin", b"http://localhost:8000"), (b"host", b"localhost:8000"), *RUSSIAN]
    communicator = WebsocketCommunicator(application, f"/ws/chat/{conversation.pk}/", headers=headers)
    assert (await communicator.connect(timeout=TIMEOUT))[0]
    socket = Socket(communicator)

    refused = await error(socket, {"type": "auth", "token": token if isinstance(token, str) else token(alice)})

    assert (refused["code"], refused["message"]) == ("AUTH_REQUIRED", f"Не удалось пройти аутентификацию: {said}")
    await communicator.disconnect()


@sync_to_async
def stored_answer(conversation) -> Message:
    return Message.objects.filter(conversation=conversation, role=Message.Role.ASSISTANT).latest("id")


@pytest.mark.parametrize(
    ("headers", "expected"),
    [
        pytest.param(RUSSIAN, "Пока нечего продолжать.", id="cookie"),
        pytest.param([(b"accept-language", b"ru-RU,ru;q=0.9,en;q=0.8")], "Пока нечего продолжать.", id="header"),
        pytest.param(
            [(b"cookie", b"django_language=en"), (b"accept-language", b"ru")],
            "There is nothing to continue yet.",
            id="cookie-wins",
        ),
        pytest.param([], "There is nothing to continue yet.", id="default"),
    ],
)
async def test_the_language_comes_from_the_cookie_then_accept_language(
    page_sockets, conversation, alice, headers, expected
):
    socket = await page_sockets(conversation, alice, headers)

    refused = await error(socket, {"type": "continue", "client_id": "more"})

    assert (refused["code"], refused["message"]) == ("INVALID", expected)


async def test_refusals_of_the_frames_themselves_are_in_russian(page_sockets, conversation, alice):
    socket = await page_sockets(conversation, alice, RUSSIAN)

    assert (await error(socket, {"type": "dance"}))["message"] == "Неизвестный тип кадра 'dance'."
    refused = await error(socket, {"type": "message", "content": "Hi", "context": []})
    assert (refused["code"], refused["message"]) == ("INVALID", '"context" должно быть объектом.')
    refused = await error(socket, {"type": "confirm", "confirmation_id": "nope", "decision": "approve"})
    assert refused["message"] == '"confirmation_id" должно быть идентификатором запроса на подтверждение.'


async def test_busy_is_said_in_russian(llm, page_sockets, conversation, alice):
    llm.script(Reply(text="A slow answer that takes a while.", interval=SLOW))
    socket = await page_sockets(conversation, alice, RUSSIAN)
    await socket.send({"type": "message", "content": "First", "client_id": "first"})
    await socket.receive_until("token")

    await socket.send({"type": "message", "content": "Too soon", "client_id": "soon"})
    busy = (await socket.receive_until("error"))[-1]

    assert (busy["code"], busy["message"]) == (
        "BUSY",
        "В этой беседе агент уже работает. Дождитесь, пока он закончит, или остановите его.",
    )
    await socket.receive_until("run_finished")


async def test_the_daily_budget_is_said_in_russian_with_its_numbers(llm, page_sockets, conversation, alice, settings):
    settings.USER_DAILY_TOKEN_BUDGET = 500
    llm.script(Reply(text="That was costly.", usage=(480, 30)))
    socket = await page_sockets(conversation, alice, RUSSIAN)
    await ask(socket, "Something long")

    refused = await error(socket, {"type": "message", "content": "One more?", "client_id": "more"})

    assert refused["code"] == "RATE_LIMITED"
    assert re.fullmatch(
        r"Вы израсходовали дневной лимит в 500 токенов\. Лимит обновится в полночь \(UTC\), через \d+ ч \d+ мин\.",
        refused["message"],
    ), refused["message"]


async def test_a_failed_run_is_told_in_russian_and_stored_in_english(llm, page_sockets, conversation, alice):
    llm.script(Reply(status=401))
    socket = await page_sockets(conversation, alice, RUSSIAN)

    frames = await ask(socket, "Hello?")

    said = "Провайдер модели отклонил учётные данные (HTTP 401)."
    assert one(frames, "error", code="PROVIDER_ERROR")["message"] == said
    assert of(frames, "message")[-1]["message"]["error"] == said
    assert (await stored_answer(conversation)).error == "The model provider refused the credentials (HTTP 401)."


async def test_the_step_limit_is_told_in_the_readers_language_wherever_it_is_read(
    llm, page_sockets, conversation, alice, tools, settings
):
    settings.AGENT_MAX_ROUNDS = 2
    llm.script(*[Reply(tool_calls=[("lookup", {"dashboard_id": n}, f"call_{n}")]) for n in range(2)])
    socket = await page_sockets(conversation, alice, RUSSIAN)

    frames = await ask(socket, "Loop")

    assert frames[-1]["status"] == "iteration_limit"
    final = of(frames, "message")[-1]["message"]
    assert final["error"] == "Агент израсходовал все свои шаги (2), не закончив ответ."
    stored = await stored_answer(conversation)
    assert stored.error == "The agent used all of its 2 steps before finishing."

    # Read later, the history says it in the reader's language.
    client = Client()
    await sync_to_async(client.force_login)(alice)
    url = f"/api/assistant/conversations/{conversation.pk}/history/"
    english = await sync_to_async(client.get)(url)
    assert english.json()["results"][-1]["error"] == "The agent used all of its 2 steps before finishing."
    russian = await sync_to_async(client.get)(url, HTTP_ACCEPT_LANGUAGE="ru")
    assert russian.json()["results"][-1]["error"] == "Агент израсходовал все свои шаги (2), не закончив ответ."


async def test_a_refused_edit_says_what_is_wrong_in_russian_while_the_model_reads_english(
    llm, page_sockets, conversation, alice, tools
):
    llm.script(
        Reply(tool_calls=[("lookup", {"dashboard_id": "seven"}, "call_bad"), ("deploy_dashboard", {"dashboard_id": 7})])
    )
    socket = await page_sockets(conversation, alice, RUSSIAN)
    frames = await ask(socket, "Deploy 7")
    confirm = one(frames, "confirm_required")

    refused = await error(
        socket,
        {"type": "confirm", "confirmation_id": confirm["confirmation_id"], "decision": "edit", "args": {"id": "x"}},
    )

    assert (refused["code"], refused["message"]) == (
        "INVALID",
        "Неверные аргументы для deploy_dashboard: dashboard_id: обязателен, но не указан; "
        "id: неизвестный аргумент (известные: dashboard_id)",
    )
    # The model's own mistake is told to it in English, and so is its record on the page.
    assert one(frames, "tool_error", tool_call_id="call_bad")["error"] == (
        'Invalid arguments for lookup: dashboard_id: expected a whole number, got "seven"'
    )


async def test_a_notice_says_its_numbers_as_russian_writes_them(llm, page_sockets, conversation, alice):
    llm.script(Reply(text="Read it."))
    socket = await page_sockets(conversation, alice, RUSSIAN)

    frames = await ask(socket, "a" * 150_000)

    kept = f"{len(truncate_message('a' * 150_000)[0]):,}".replace(",", "\xa0")
    notice = one(frames, "notice", code="MESSAGE_TRUNCATED")
    assert notice["detail"] == f"Ваше сообщение сокращено с 150\xa0000 до {kept} символов."
