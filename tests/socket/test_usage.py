"""What answers cost, over the real socket: each answer keeps its provider's usage, each user's day is totalled,
and USER_DAILY_TOKEN_BUDGET refuses new runs once spent."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from asgiref.sync import sync_to_async
from django.utils import timezone

from conversations import runs, services
from conversations.models import Message, TokenUsage
from tests.fake_provider import Reply
from tools.registry import ToolArgs, ToolRegistry

from .helpers import of
from .test_answers import ask, error, turn

pytestmark = pytest.mark.django_db(transaction=True)


class Word(ToolArgs):
    q: str


@pytest.fixture
def lookup(monkeypatch) -> None:
    registry = ToolRegistry()

    @registry.tool
    def lookup(args: Word, ctx) -> dict:
        """Look a word up."""
        return {"found": args.q}

    monkeypatch.setattr(runs.manager, "registry", registry)


@sync_to_async
def today(user) -> TokenUsage | None:
    return TokenUsage.objects.filter(user=user, day=timezone.localdate()).first()


@sync_to_async
def answers(conversation) -> list[dict | None]:
    return list(Message.objects.filter(conversation=conversation, role="assistant").values_list("usage", flat=True))


async def test_each_answer_keeps_its_usage_and_the_day_adds_them_up(llm, sockets, conversation, alice, lookup):
    llm.script(
        Reply(tool_calls=[("lookup", {"q": "usage"}, "call_1")], usage=(300, 20)), Reply(text="Found.", usage=(340, 5))
    )
    socket = await sockets(conversation, alice)

    frames = await ask(socket, "Look usage up")

    shown = [frame["message"]["usage"] for frame in of(frames, "message") if frame["message"]["role"] == "assistant"]
    assert shown == [{"prompt_tokens": 300, "completion_tokens": 20}, {"prompt_tokens": 340, "completion_tokens": 5}]
    assert await answers(conversation) == shown
    row = await today(alice)
    assert (row.prompt_tokens, row.completion_tokens, row.answers) == (640, 25, 2)


async def test_a_provider_that_reports_no_usage_leaves_it_null(llm, sockets, conversation, alice):
    llm.script(Reply(text="No counts.", usage=None))
    socket = await sockets(conversation, alice)

    frames = await ask(socket, "Hi")

    assert of(frames, "message")[-1]["message"]["usage"] is None
    assert await answers(conversation) == [None]
    assert await today(alice) is None


async def test_over_the_daily_budget_new_runs_are_refused_until_midnight(
    llm, sockets, conversation, alice, bob, settings
):
    settings.USER_DAILY_TOKEN_BUDGET = 500
    llm.script(Reply(text="That was costly.", usage=(480, 30)), Reply(text="Bob is fine."))
    socket = await sockets(conversation, alice)
    await ask(socket, "Something long")

    for frame in (
        {"type": "message", "content": "One more?", "client_id": "more"},
        {"type": "regenerate", "client_id": "again"},
    ):
        refused = await error(socket, frame)
        assert refused["code"] == "RATE_LIMITED"
        assert re.fullmatch(
            r"You have used today's budget of 500 tokens\. It resets at midnight \(UTC\), in \d+ h \d+ min\.",
            refused["message"],
        ), refused["message"]
    assert len(await answers(conversation)) == 1 and len(llm.requests) == 1

    bobs = await sync_to_async(services.conversation_create)(owner=bob)
    bob_socket = await sockets(bobs, bob)
    assert (await ask(bob_socket, "Hello"))[-1]["status"] == "completed"

    await sync_to_async(TokenUsage.objects.filter(user=alice).update)(day=timezone.localdate() - timedelta(days=1))
    assert (await turn(socket, {"type": "message", "content": "A new day", "client_id": "new"}))[-1][
        "status"
    ] == "completed"
