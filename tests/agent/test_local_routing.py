"""The local model's decisions: the helpers that choose what it is shown, and a few decisions on the real model.

How often it routes right, over fixed sets of requests, is measured by `make eval` (evals/), not here.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from agentchat.agent.prompts import build_system_prompt
from agentchat.agent.providers import ChatMessage, ProviderChatParams, ProviderConfig, ProviderError, ToolSchema
from agentchat.agent.providers.local import LocalProvider, choose_examples, to_chatml_messages
from agentchat.agent.providers.local.model import generation_lock
from agentchat.agent.providers.local.routing import each_listed
from agentchat.agent.providers.openai_compatible import to_wire_tools
from tools.files import ATTACHED, REFERENCED
from tools.registry import ToolArgs, ToolContext, ToolRegistry, registry

from .test_local_provider import ONE_THREAD, lock_released

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


def offered() -> list[ToolSchema]:
    return [registry.get(name).schema() for name in [*DASHBOARD_TOOLS, *OTHER_TOOLS] if registry.has(name)]


def user(text: str) -> ChatMessage:
    return {"role": "user", "content": text}


def said(name: str, args: dict[str, Any]) -> dict[str, Any]:
    """The arguments of a call without those that only repeat the tool's defaults (page 1 of a search)."""
    tool = registry.find(name)
    properties = tool.schema()["parameters"].get("properties", {}) if tool is not None else {}
    return {key: value for key, value in args.items() if properties.get(key, {}).get("default", ...) != value}


@pytest.fixture(scope="module")
def provider() -> LocalProvider:
    return LocalProvider(ONE_THREAD)


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
    # The tool's own summary: every title and number is one the result holds, and nothing else is claimed.
    assert answer.content == (
        "Found 22 dashboards:\n\n"
        "- #3 “Marketing campaign performance” (published, owner Olivia Chen)\n"
        "- #7 “Customer support SLA” (published, owner James Patel)\n"
        "- #8 “Бюджет маркетинга” (draft, owner Мария Иванова)\n\n"
        "These are 3 of them (page 1 of 8). Say “next” for more."
    )


async def test_a_decision_keeps_the_deadline(provider: LocalProvider):
    hurried = LocalProvider(ProviderConfig(timeout=0.001, threads=1))
    params = ProviderChatParams(messages=[user("Deploy dashboard 9 to staging")], tools=offered())
    with pytest.raises(ProviderError, match=r"made no progress for 0\.001 s"):
        await hurried.chat(params)
    assert await lock_released()


async def test_cancelling_during_a_decision_releases_the_model(provider: LocalProvider):
    # A long history, so that the cancellation lands while the decision is still reading it.
    history = [user("word " * 3000), {"role": "assistant", "content": "ok"}, user("Deploy dashboard 9 to staging")]
    task = asyncio.create_task(provider.chat(ProviderChatParams(messages=history, tools=offered())))
    async with asyncio.timeout(10):
        while not generation_lock.locked():
            await asyncio.sleep(0.01)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert await lock_released()


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

    with_examples, without = [tool.schema() for tool in tools.all()]
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


@pytest.mark.parametrize(
    ("request_text", "expected"),
    [
        ("How healthy are dashboards 7, 12 and 19?", ("dashboard_health", [{}, {}, {}], [7, 12, 19])),
        ("Выкати дашборды 4 и 6 в прод", ("deploy_dashboard", [{"environment": "production"}] * 2, [4, 6])),
    ],
)
async def test_a_list_of_numbers_is_one_call_for_each(provider: LocalProvider, request_text, expected):
    params = ProviderChatParams(messages=[user(request_text)], system_prompt=build_system_prompt(), tools=offered())
    answer = await provider.chat(params)
    name, others, ids = expected
    assert [call["name"] for call in answer.tool_calls] == [name] * len(ids)
    assert [call["args"].pop("dashboard_id") for call in answer.tool_calls] == ids
    assert [said(name, call["args"]) for call in answer.tool_calls] == others
    assert len({call["id"] for call in answer.tool_calls}) == len(ids)


def test_only_a_list_after_the_arguments_word_is_taken():
    health = registry.get("dashboard_health").schema()
    call = {"id": "call_1", "name": "dashboard_health", "args": {"dashboard_id": 3}}
    for request_text in ["Dashboard 3 or 4?", "dashboard 3, then tell me a joke", "Show 3 and 4 of dashboard 3"]:
        assert each_listed(call, request_text, health) == [call]
    [first, second] = each_listed(call, "dashboards 3 & 4 and 3", health)
    assert first == call and second["args"] == {"dashboard_id": 4}
    # Only ids the argument takes: a dashboard's id is 1 or more.
    [first, second] = each_listed(call, "dashboards 3, 0 and 5", health)
    assert second["args"] == {"dashboard_id": 5}


async def test_a_question_about_an_action_reads_instead_of_acting(provider: LocalProvider):
    params = ProviderChatParams(
        messages=[user("Is it safe to deploy dashboard 9 to production?")],
        system_prompt=build_system_prompt(),
        tools=offered(),
    )
    answer = await provider.chat(params)
    [call] = answer.tool_calls
    assert (call["name"], call["args"]) == ("dashboard_health", {"dashboard_id": 9})


async def test_when_two_tools_score_too_close_it_asks_which(provider: LocalProvider):
    params = ProviderChatParams(
        messages=[user("Push dashboard 8 to production")], system_prompt=build_system_prompt(), tools=offered()
    )
    answer = await provider.chat(params)
    assert answer.tool_calls == []
    assert answer.content.startswith("I am not sure what you would like me to do. Did you mean something like “")


async def test_russian_small_talk_gets_an_honest_fixed_reply(provider: LocalProvider):
    params = ProviderChatParams(
        messages=[user("Спокойной ночи!")], system_prompt=build_system_prompt(), tools=offered()
    )
    answer = await provider.chat(params)
    assert answer.tool_calls == []
    assert answer.content.startswith("Я — демонстрационная модель")


@pytest.mark.parametrize(
    ("request_text", "says"), [("Помогите", "Я — демонстрационная модель"), ("Help!", "I am the demo")]
)
async def test_a_bare_call_for_help_is_told_what_the_demo_model_can_do(provider: LocalProvider, request_text, says):
    params = ProviderChatParams(messages=[user(request_text)], system_prompt=build_system_prompt(), tools=offered())
    answer = await provider.chat(params)
    assert answer.tool_calls == []
    assert answer.content.startswith(says)


async def test_numbers_of_the_attached_files_are_no_dashboard_id(provider: LocalProvider):
    files = (
        "Files the user attached to this conversation, newest first:\n- id 7: CSV table, 4 rows × 3 columns, 95 bytes"
    )
    asked = [user("Какой регион продал больше в феврале?")]
    on_a_page = ProviderChatParams(
        messages=[user("How healthy is it?")],
        system_prompt=build_system_prompt({"focus": {"type": "dashboard", "id": 42}}),
        tools=offered(),
    )

    answer = await provider.chat(
        ProviderChatParams(messages=asked, system_prompt=build_system_prompt(None, [files]), tools=offered())
    )
    shown = await provider.chat(on_a_page)

    assert not [call for call in answer.tool_calls if "dashboard_id" in call["args"]], answer.tool_calls
    assert [(call["name"], call["args"]) for call in shown.tool_calls] == [("dashboard_health", {"dashboard_id": 42})]


async def test_a_question_about_the_files_is_told_that_the_demo_model_does_not_read_them(provider: LocalProvider):
    table = "region,revenue\nEMEA,120\nAPAC,90\n\n--- End of the attached files ---"
    attached = user(f"What is the total revenue in this file?{ATTACHED}\n\n{table}")
    referenced = user(f'Hi\n\n{REFERENCED}"sales.csv" (CSV table, 2 rows × 2 columns); id 7.]')
    hello: ChatMessage = {"role": "assistant", "content": "Hello!"}

    async def answer(*history: ChatMessage):
        params = ProviderChatParams(messages=list(history), system_prompt=build_system_prompt(), tools=offered())
        return await provider.chat(params)

    for history, says in [
        ((attached,), "I cannot read attached files."),
        ((referenced, hello, user("Что в этом файле?")), "прикреплённые файлы я читать не умею."),
    ]:
        said_back = await answer(*history)
        assert said_back.tool_calls == [] and says in said_back.content, said_back.content
    # With files attached, a request for a tool is served; without any, a file is a word like any other.
    [call] = (await answer(referenced, hello, user("Check dashboard 5"))).tool_calls
    assert call["name"] == "dashboard_health"
    [call] = (await answer(user("Which dashboards use the file uploads dataset?"))).tool_calls
    assert call["name"] == "search_dashboards"


async def test_english_small_talk_gets_one_line_and_a_general_question_the_fixed_reply(provider: LocalProvider):
    def asked(text: str) -> ProviderChatParams:
        return ProviderChatParams(messages=[user(text)], system_prompt=build_system_prompt(), tools=offered())

    question = await provider.chat(asked("What's the capital of France?"))

    for said in ["Hi", "bye", "ok"]:
        reply = await provider.chat(asked(said))
        assert reply.tool_calls == [] and reply.content.strip() and "\n" not in reply.content, said
    assert question.tool_calls == [] and question.content.startswith("I am the demo model")


async def test_a_request_that_points_back_means_the_dashboard_of_the_last_call(provider: LocalProvider):
    checked = [
        user("How is dashboard 12 doing?"),
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [{"id": "c1", "name": "dashboard_health", "args": {"dashboard_id": 12}}],
        },
        {
            "role": "tool",
            "content": '{"id": 12, "owner": "Дмитрий Орлов"}',
            "tool_call_id": "c1",
            "name": "dashboard_health",
        },
        {"role": "assistant", "content": "Dashboard #12 has 1 error."},
    ]

    async def calls(history: list[ChatMessage]) -> list[tuple[str, dict]]:
        params = ProviderChatParams(messages=history, system_prompt=build_system_prompt(), tools=offered())
        return [(call["name"], call["args"]) for call in (await provider.chat(params)).tool_calls]

    assert await calls([*checked, user("Is it ready for production?")]) == [("dashboard_health", {"dashboard_id": 12})]
    assert await calls([*checked, user("Who owns it?")]) == [("dashboard_health", {"dashboard_id": 12})]
    assert await calls([*checked, user("Кто его владелец?")]) == [("dashboard_health", {"dashboard_id": 12})]
    # A request that does not point back starts afresh.
    [(name, args)] = await calls([*checked, user("Which dashboards have validation problems?")])
    assert name == "search_dashboards" and args["has_validation_problems"] is True


@pytest.mark.parametrize(
    "request_text", ["Show dashboards with errors, 20 per page", "Покажи дашборды с ошибками, по 20 на странице"]
)
async def test_a_number_per_page_is_the_page_size_never_a_dashboard(provider: LocalProvider, request_text):
    params = ProviderChatParams(messages=[user(request_text)], system_prompt=build_system_prompt(), tools=offered())
    [call] = (await provider.chat(params)).tool_calls
    assert (call["name"], said(call["name"], call["args"])) == (
        "search_dashboards",
        {"has_validation_problems": True, "severity": "error", "page_size": 20},
    )


@pytest.mark.parametrize(
    ("request_text", "expected"),
    [
        (
            "Which dashboards have the most errors?",
            {"has_validation_problems": True, "severity": "error", "order": "worst"},
        ),
        ("What are the worst dashboards?", {"order": "worst"}),
        (
            "У каких дашбордов больше всего ошибок?",
            {"has_validation_problems": True, "severity": "error", "order": "worst"},
        ),
        ("Какие дашборды в худшем состоянии?", {"order": "worst"}),
        # Problems named without "most" or "worst" keep the catalogue's order.
        ("Which dashboards have validation problems?", {"has_validation_problems": True}),
        ("dashboards without warnings", {"has_validation_problems": False, "severity": "warning"}),
    ],
)
async def test_the_worst_first_only_when_asked_for(provider: LocalProvider, request_text, expected):
    params = ProviderChatParams(messages=[user(request_text)], system_prompt=build_system_prompt(), tools=offered())
    [call] = (await provider.chat(params)).tool_calls
    assert (call["name"], said(call["name"], call["args"])) == ("search_dashboards", expected)


@pytest.mark.parametrize(
    ("request_text", "listed"),
    [
        ("Hi there, how are you today?", False),
        ("what do we have?", False),
        ("List all dashboards", True),
        ("Какие у меня есть дашборды?", True),
    ],
)
async def test_the_whole_catalogue_only_for_a_request_that_speaks_of_it(provider: LocalProvider, request_text, listed):
    params = ProviderChatParams(messages=[user(request_text)], system_prompt=build_system_prompt(), tools=offered())
    calls = [(call["name"], said(call["name"], call["args"])) for call in (await provider.chat(params)).tool_calls]
    assert calls == ([("search_dashboards", {})] if listed else []), request_text
