"""How well the local model (the packaged SmolLM2-135M) picks the demo's tools and their arguments.

A fixed set of requests, in English and Russian, each with the tool (or "none") and the key arguments it should
get; decisions are deterministic. Run with `-s` to see the table:

    .venv/bin/pytest tests/agent/test_local_routing.py -s

HOLDOUT, requests written before the examples were tuned and kept unlike them, has a floor of its own.
Letting the model write the whole call (the provider before examples and scoring) got 3 of the 20 CASES right,
tool and arguments, and 3 of the 14 HOLDOUT tools (1 with its arguments); now 20 and 20, 11 and 10.
"""

from __future__ import annotations

import asyncio
import statistics
import time
from dataclasses import dataclass, field
from typing import Any

import pytest

from agentchat.agent.prompts import build_system_prompt
from agentchat.agent.providers import ChatMessage, ProviderChatParams, ProviderConfig, ProviderError, ToolSchema, local
from agentchat.agent.providers.local import LocalProvider, choose_examples, to_chatml_messages
from agentchat.agent.providers.openai_compatible import to_wire_tools
from tools.registry import ToolArgs, ToolContext, ToolRegistry, registry

from .test_local_provider import lock_released

DASHBOARD_TOOLS = [
    "search_dashboards",
    "dashboard_health",
    "create_branch",
    "deploy_dashboard",
    "execute_migration",
    "commit_changes",
]
# Offered to the same user alongside, so the model has them to choose wrongly too.
OTHER_TOOLS = ["read_document", "search_document", "query_table"]


@dataclass(frozen=True)
class Case:
    """A request and the call it should get: exactly these arguments (or one argument containing `mentions`:
    "owned by Olivia" may go to `owner` or to `query`), and no others unless `more` (where one more does no harm:
    a branch's name, a commit's message)."""

    request: str
    tool: str
    args: dict[str, Any] = field(default_factory=dict)
    mentions: str = ""
    more: bool = False

    def judge(self, name: str, args: dict[str, Any]) -> tuple[bool, bool]:
        if name != self.tool:
            return False, False
        if self.mentions:
            return True, len(args) == 1 and self.mentions in str(next(iter(args.values()))).lower()
        if self.more:
            return True, all(args.get(key) == value for key, value in self.args.items())
        return True, args == self.args


# The four the brief reported (the first is README's example and, like the fourth, one of the tool's own).
REPORTED = [
    Case("Which dashboards have validation problems?", "search_dashboards", {"has_validation_problems": True}),
    Case("Create a branch for dashboard 42", "create_branch", {"dashboard_id": 42}, more=True),
    Case("Deploy dashboard 42 to production", "deploy_dashboard", {"dashboard_id": 42, "environment": "production"}),
    Case("покажи дашборды с проблемами валидации", "search_dashboards", {"has_validation_problems": True}),
]
CASES = [
    *REPORTED,
    Case("List the dashboards that have validation errors", "search_dashboards", {"has_validation_problems": True}),
    Case("Find the dashboards owned by Olivia Chen", "search_dashboards", mentions="olivia"),
    Case("Найди дашборды с тегом finance", "search_dashboards", mentions="financ"),
    Case("What is wrong with dashboard 7?", "dashboard_health", {"dashboard_id": 7}),
    Case("Проверь состояние дашборда 19", "dashboard_health", {"dashboard_id": 19}),
    Case("Can dashboard 7 go to production?", "dashboard_health", {"dashboard_id": 7}),
    Case("Создай ветку для дашборда 15", "create_branch", {"dashboard_id": 15}, more=True),
    Case("Задеплой дашборд 12 на staging", "deploy_dashboard", {"dashboard_id": 12, "environment": "staging"}),
    Case("Run the pending migration of dashboard 42", "execute_migration", {"dashboard_id": 42}),
    Case("Выполни миграцию дашборда 42", "execute_migration", {"dashboard_id": 42}),
    Case("Commit the changes of dashboard 42", "commit_changes", {"dashboard_id": 42}, more=True),
    Case("Закоммить изменения дашборда 23", "commit_changes", {"dashboard_id": 23}, more=True),
    Case("Hello!", "none"),
    Case("Thanks, that's all.", "none"),
    Case("Привет! Как дела?", "none"),
    Case("Tell me a joke.", "none"),
]
HOLDOUT = [
    Case("Show dashboards with errors", "search_dashboards", {"has_validation_problems": True}),
    Case("Какие дашборды принадлежат Ирине Смирновой?", "search_dashboards", mentions="ирин"),
    Case("dashboards tagged marketing", "search_dashboards", mentions="marketing"),
    Case("Give me the health report of dashboard 3", "dashboard_health", {"dashboard_id": 3}),
    Case("Что не так с дашбордом 42?", "dashboard_health", {"dashboard_id": 42}),
    Case("Branch dashboard 19 as experiment-1", "create_branch", {"dashboard_id": 19, "name": "experiment-1"}),
    Case("Открой новую ветку для дашборда 7", "create_branch", {"dashboard_id": 7}, more=True),
    Case("Ship dashboard 5 to staging", "deploy_dashboard", {"dashboard_id": 5, "environment": "staging"}),
    Case("Разверни дашборд 42 в production", "deploy_dashboard", {"dashboard_id": 42, "environment": "production"}),
    Case("Apply the migrations of dashboard 12", "execute_migration", {"dashboard_id": 12}),
    Case("Зафиксируй изменения дашборда 42", "commit_changes", {"dashboard_id": 42}, more=True),
    Case("Good night!", "none"),
    Case("Сколько будет 2+2?", "none"),
    Case("Who are you?", "none"),
]
# Floors a little under what the packaged model reaches (20 and 20 of 20), for llama.cpp builds that round
# differently; the reported four must be right.
TOOL_FLOOR, ARGS_FLOOR = 18, 17


def offered() -> list[ToolSchema]:
    return [registry.get(name).schema() for name in [*DASHBOARD_TOOLS, *OTHER_TOOLS] if registry.has(name)]


def user(text: str) -> ChatMessage:
    return {"role": "user", "content": text}


@pytest.fixture(scope="module")
def provider() -> LocalProvider:
    return LocalProvider(ProviderConfig())


async def evaluate(provider: LocalProvider, cases: list[Case]) -> tuple[int, int, list[str], list[float]]:
    tools, system_prompt = offered(), build_system_prompt()
    right_tool = right_args = 0
    lines, seconds = [], []
    for case in cases:
        started = time.monotonic()
        # max_tokens=1: after "none" the answer itself is not what is measured.
        params = ProviderChatParams(
            messages=[user(case.request)], system_prompt=system_prompt, tools=tools, max_tokens=1
        )
        answer = await provider.chat(params)
        seconds.append(time.monotonic() - started)
        call = answer.tool_calls[0] if answer.tool_calls else {"name": "none", "args": {}}
        tool_ok, args_ok = case.judge(call["name"], call["args"])
        right_tool += tool_ok
        right_args += args_ok
        mark = "ok  " if args_ok else ("args" if tool_ok else "TOOL")
        lines.append(f"{mark} {seconds[-1]:5.2f}s  {case.request[:48]:<48} -> {call['name']} {call['args']}")
    return right_tool, right_args, lines, seconds


def report(title: str, cases: list[Case], right_tool: int, right_args: int, lines: list[str], seconds: list[float]):
    summary = (
        f"{title}: tool right {right_tool}/{len(cases)}, tool and key arguments right {right_args}/{len(cases)}; "
        f"a decision took {statistics.median(seconds):.2f} s (median), {max(seconds):.2f} s at most"
    )
    text = "\n".join([summary, *lines])
    print(f"\n{text}")
    return text


async def test_the_demo_requests_get_the_right_tool_and_arguments(provider: LocalProvider):
    right_tool, right_args, lines, seconds = await evaluate(provider, CASES)
    text = report("CASES", CASES, right_tool, right_args, lines, seconds)
    assert right_tool >= TOOL_FLOOR and right_args >= ARGS_FLOOR, text
    assert all(line.startswith("ok") for line in lines[: len(REPORTED)]), text


async def test_requests_kept_out_of_the_tuning_mostly_route_right(provider: LocalProvider):
    # Measured when the examples were chosen: 11 of 14 tools and 10 of 14 with their arguments.
    right_tool, right_args, lines, seconds = await evaluate(provider, HOLDOUT)
    text = report("HOLDOUT", HOLDOUT, right_tool, right_args, lines, seconds)
    assert right_tool >= 11 and right_args >= 10, text


async def test_a_request_after_an_earlier_exchange_is_still_routed(provider: LocalProvider):
    history = [
        user("Hello!"),
        {"role": "assistant", "content": "Hello! How can I help you today?"},
        user("Deploy dashboard 9 to staging"),
    ]
    answer = await provider.chat(
        ProviderChatParams(messages=history, system_prompt=build_system_prompt(), tools=offered())
    )
    [call] = answer.tool_calls
    assert (call["name"], call["args"]) == ("deploy_dashboard", {"dashboard_id": 9, "environment": "staging"})


async def test_after_a_tool_result_it_answers_in_words_not_with_the_call(provider: LocalProvider):
    result = (
        '{"total": 22, "page": 1, "page_size": 3, "pages": 8, "items": ['
        '{"id": 3, "title": "Marketing campaign performance", "owner": "Olivia Chen", "status": "published"}, '
        '{"id": 7, "title": "Customer support SLA", "owner": "James Patel", "status": "published"}, '
        '{"id": 8, "title": "Бюджет маркетинга", "owner": "Мария Иванова", "status": "draft"}]}'
    )
    history: list[ChatMessage] = [
        user("Which dashboards have validation problems?"),
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [{"id": "call_1", "name": "search_dashboards", "args": {"has_validation_problems": True}}],
        },
        {"role": "tool", "tool_call_id": "call_1", "name": "search_dashboards", "content": result},
    ]
    params = ProviderChatParams(messages=history, system_prompt=build_system_prompt(), tools=offered(), max_tokens=48)
    answer = await provider.chat(params)
    assert answer.tool_calls == []
    assert answer.content.strip() and not answer.content.lstrip().startswith("{")
    assert '"tool"' not in answer.content


async def test_a_decision_keeps_the_deadline(provider: LocalProvider):
    hurried = LocalProvider(ProviderConfig(timeout=0.001))
    params = ProviderChatParams(messages=[user("Deploy dashboard 9 to staging")], tools=offered())
    with pytest.raises(ProviderError, match="did not finish within"):
        await hurried.chat(params)
    assert await lock_released()


async def test_cancelling_during_a_decision_releases_the_model(provider: LocalProvider):
    # A long history, so that the cancellation lands while the decision is still reading it.
    history = [user("word " * 3000), {"role": "assistant", "content": "ok"}, user("Deploy dashboard 9 to staging")]
    task = asyncio.create_task(provider.chat(ProviderChatParams(messages=history, tools=offered())))
    await asyncio.sleep(0.3)
    assert local._generation_lock.locked()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert await lock_released(timeout=2.0)


# --- without the model ---


class CityArgs(ToolArgs):
    city: str


def test_examples_reach_the_schema_only_when_a_tool_declares_them():
    tools = ToolRegistry()

    @tools.tool(examples=[("Weather in Oslo?", {"city": "Oslo"})])
    def get_weather(args: CityArgs, ctx: ToolContext) -> dict:
        """Get the current weather for a city."""
        return {}

    @tools.tool
    def get_time(args: CityArgs, ctx: ToolContext) -> dict:
        """Get the local time in a city."""
        return {}

    with_examples, without = tools.to_tool_schemas()
    assert with_examples["examples"] == [{"request": "Weather in Oslo?", "args": {"city": "Oslo"}}]
    assert "examples" not in without
    # The openai-compatible provider does not send them.
    assert "examples" not in str(to_wire_tools([with_examples]))


def test_an_example_whose_arguments_do_not_fit_is_refused_at_registration():
    with pytest.raises(
        TypeError, match=r"get_weather: example 'Weather\?' has bad arguments: city: required, but missing"
    ):

        @ToolRegistry().tool(examples=[("Weather?", {"town": "Oslo"})])
        def get_weather(args: CityArgs, ctx: ToolContext) -> dict:
            """Get the current weather for a city."""
            return {}


def test_every_dashboard_tool_has_examples_in_english_and_russian():
    for name in DASHBOARD_TOOLS:
        requests = [example["request"] for example in registry.get(name).schema()["examples"]]
        assert any(request.isascii() for request in requests), name
        assert any(any("а" <= letter <= "я" for letter in request.lower()) for request in requests), name


def test_the_closest_examples_are_shown_closest_last():
    shown, closest = choose_examples("Create a branch for dashboard 42", offered())
    assert [name for name, _, _ in shown] == ["create_branch", "create_branch"]
    assert shown[-1][1] == "Create a branch of dashboard 5"
    assert max(closest, key=closest.get) == "create_branch"


def test_small_talk_is_shown_only_when_the_request_is_closer_to_it_than_to_any_tool():
    shown, _ = choose_examples("Hello!", offered())
    assert shown[-1][0] == "none"
    shown, _ = choose_examples("Deploy dashboard 42 to production", offered())
    assert "none" not in [name for name, _, _ in shown]
    # A tool without examples is known by its description: "none" is not shown here, or the model follows it.
    weather: ToolSchema = {
        "name": "get_weather",
        "description": "Get the current weather for a city.",
        "parameters": {},
    }
    shown, closest = choose_examples("What is the weather in Paris?", [weather])
    assert shown == [] and closest["get_weather"] > closest["none"]


def test_past_calls_are_told_in_words_not_as_json():
    history: list[ChatMessage] = [
        user("Which dashboards have validation problems?"),
        {"role": "assistant", "content": "", "tool_calls": [{"id": "c1", "name": "search_dashboards", "args": {}}]},
        {"role": "tool", "tool_call_id": "c1", "name": "search_dashboards", "content": '{"total": 0}'},
    ]
    assert to_chatml_messages(history)[1:] == [
        {"role": "assistant", "content": "Calling search_dashboards."},
        {"role": "tool", "content": '{"total": 0}'},
    ]
