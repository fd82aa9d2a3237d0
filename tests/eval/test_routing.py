"""How well the local model (the packaged SmolLM2-135M) picks the demo's tools and their arguments: `make eval`.

Fixed requests, in English and Russian, each with the tool (or "none") and the key arguments it should get;
decisions are deterministic. A table of the figures is printed at the end; `-s` shows every decision.

The sets are named for how they were used. The TUNING sets are what the tools' examples, the routing's weights,
its margin and its rules were chosen on (144 requests). Three of them were first written as sets kept out of the
tuning and were tuned on once measured: the former held-out set; the first fresh set (measured once at 32 of 40
tools right, 26 of 40 with their arguments, no dangerous tool unasked); and the second (33, 33 and none). FRESH, the
third, was written after all of that was
frozen, to the brief: 40 requests, half English, half Russian; a quarter calling for no tool, a quarter naming an
action that waits for approval, a quarter asking about something such an action acts on (which the tool that reads
should answer), a quarter for the other tools. It has never been used to tune anything; whoever tunes on it must
write a new fresh set.

Letting the model write the whole call (the provider before examples and scoring) got 3 of the 20 of the first
tuning set right, tool and arguments.
"""

from __future__ import annotations

import statistics
import time
from contextlib import aclosing
from dataclasses import dataclass, field
from typing import Any

from agentchat.agent.prompts import build_system_prompt
from agentchat.agent.providers import ProviderChatParams, ProviderChatResponse
from agentchat.agent.providers.local import LocalProvider
from tests.agent.test_local_routing import offered, said, user
from tools.registry import Tool, ToolArgumentsError, registry

# Where a name or a tag may go and still be found (the search's words match owners and tags too).
OWNER, TAG = ("query", "owner"), ("query", "tag")
# The summary table: request set, then its figures.
COLUMNS = ("requests", "tool right", "key args right", "dangerous unasked", "asked back", "first event s", "max s")


@dataclass(frozen=True)
class Case:
    """A request and the call it should get: exactly these arguments (or one argument containing `mentions`, one
    of those `within` that would find it: the search's words match titles, owners and tags alike, so "owned by
    Olivia" may go to `owner` or to `query`, but "about churn" only to `query`), and no others unless `more`
    (where one more does no harm: a branch's name)."""

    request: str
    tool: str
    args: dict[str, Any] = field(default_factory=dict)
    mentions: str = ""
    within: tuple[str, ...] = ("query",)
    more: bool = False

    def judge(self, name: str, args: dict[str, Any]) -> tuple[bool, bool]:
        if name != self.tool:
            return False, False
        if self.mentions:
            found = [key for key, value in args.items() if key in self.within and self.mentions in str(value).lower()]
            return True, len(args) == 1 and bool(found)
        if self.more:
            return True, all(args.get(key) == value for key, value in self.args.items())
        return True, args == self.args


# The four first reported (the first is README's example and, like the fourth, one of the tool's own).
REPORTED = [
    Case("Which dashboards have validation problems?", "search_dashboards", {"has_validation_problems": True}),
    Case("Create a branch for dashboard 42", "create_branch", {"dashboard_id": 42}, more=True),
    Case("Deploy dashboard 42 to production", "deploy_dashboard", {"dashboard_id": 42, "environment": "production"}),
    Case("покажи дашборды с проблемами валидации", "search_dashboards", {"has_validation_problems": True}),
]
# Reported later: the whole catalogue, asked for in the words people use (once a tag made of "Какие у меня есть").
REPORTED_WHOLE_CATALOGUE = [
    Case("Какие у меня есть дашборды?", "search_dashboards", {}),
    Case("What dashboards do I have?", "search_dashboards", {}),
    Case("Show my dashboards", "search_dashboards", {}),
    Case("Покажи мои дашборды", "search_dashboards", {}),
    Case("List all dashboards", "search_dashboards", {}),
    Case("Покажи все дашборды", "search_dashboards", {}),
]
TUNING = [
    *REPORTED,
    *REPORTED_WHOLE_CATALOGUE,
    Case(
        "List the dashboards that have validation errors",
        "search_dashboards",
        {"has_validation_problems": True, "severity": "error"},
    ),
    Case("Find the dashboards owned by Olivia Chen", "search_dashboards", mentions="olivia", within=OWNER),
    Case("Найди дашборды с тегом finance", "search_dashboards", mentions="financ", within=TAG),
    Case("What is wrong with dashboard 7?", "dashboard_health", {"dashboard_id": 7}),
    Case("Проверь состояние дашборда 19", "dashboard_health", {"dashboard_id": 19}),
    Case("Can dashboard 7 go to production?", "dashboard_health", {"dashboard_id": 7}),
    Case("Создай ветку для дашборда 15", "create_branch", {"dashboard_id": 15}, more=True),
    Case("Задеплой дашборд 12 на staging", "deploy_dashboard", {"dashboard_id": 12, "environment": "staging"}),
    Case("Run the pending migration of dashboard 42", "execute_migration", {"dashboard_id": 42}),
    Case("Выполни миграцию дашборда 42", "execute_migration", {"dashboard_id": 42}),
    Case("Run migration 2 on dashboard 5", "execute_migration", {"dashboard_id": 5, "migration_id": 2}),
    Case("Commit the changes of dashboard 42", "commit_changes", {"dashboard_id": 42}),
    Case("Закоммить изменения дашборда 23", "commit_changes", {"dashboard_id": 23}),
    Case(
        "Commit my changes to dashboard 5 with message fixed stock filter",
        "commit_changes",
        {"dashboard_id": 5, "message": "fixed stock filter"},
    ),
    # From use: a name after "called" (once «called» itself), and a request to be shown what an action would do.
    Case("Create a branch called test on dashboard 9", "create_branch", {"dashboard_id": 9, "name": "test"}),
    Case("Создай ветку с именем fix-9 для дашборда 6", "create_branch", {"dashboard_id": 6, "name": "fix-9"}),
    Case("Show the migrations to run on dashboard 5", "dashboard_health", {"dashboard_id": 5}),
    # From use: what is broken, asked the way people ask it; a dashboard's status by its number alone.
    Case("What's failing?", "search_dashboards", {"has_validation_problems": True}),
    Case("anything with errors?", "search_dashboards", {"has_validation_problems": True, "severity": "error"}),
    Case("Что-нибудь сломалось?", "search_dashboards", {"has_validation_problems": True}),
    Case("status of 12", "dashboard_health", {"dashboard_id": 12}),
    Case(
        "which one has the most errors",
        "search_dashboards",
        {"has_validation_problems": True, "severity": "error", "order": "worst"},
    ),
    Case("Hello!", "none"),
    Case("Thanks, that's all.", "none"),
    Case("Привет! Как дела?", "none"),
    Case("Tell me a joke.", "none"),
]
TUNING_UNLIKE_EXAMPLES = [
    Case("Show dashboards with errors", "search_dashboards", {"has_validation_problems": True, "severity": "error"}),
    Case("Какие дашборды принадлежат Ирине Смирновой?", "search_dashboards", mentions="ирин", within=OWNER),
    Case("dashboards tagged marketing", "search_dashboards", mentions="marketing", within=TAG),
    Case("Give me the health report of dashboard 3", "dashboard_health", {"dashboard_id": 3}),
    Case("Что не так с дашбордом 42?", "dashboard_health", {"dashboard_id": 42}),
    Case("Branch dashboard 19 as experiment-1", "create_branch", {"dashboard_id": 19, "name": "experiment-1"}),
    Case("Открой новую ветку для дашборда 7", "create_branch", {"dashboard_id": 7}, more=True),
    Case("Ship dashboard 5 to staging", "deploy_dashboard", {"dashboard_id": 5, "environment": "staging"}),
    Case("Разверни дашборд 42 в production", "deploy_dashboard", {"dashboard_id": 42, "environment": "production"}),
    Case("Apply the migrations of dashboard 12", "execute_migration", {"dashboard_id": 12}),
    Case("Зафиксируй изменения дашборда 42", "commit_changes", {"dashboard_id": 42}),
    Case("Good night!", "none"),
    Case("Сколько будет 2+2?", "none"),
    Case("Who are you?", "none"),
]
TUNING_FORMER_HELD_OUT = [
    Case("Which dashboards are still drafts?", "search_dashboards", {"status": "draft"}),
    Case("Show me Maria Ivanova's dashboards", "search_dashboards", mentions="ivanova", within=OWNER),
    Case("Есть ли дашборды про продажи?", "search_dashboards", mentions="продаж"),
    Case("Does dashboard 4 have any errors?", "dashboard_health", {"dashboard_id": 4}),
    Case("Is it safe to deploy dashboard 9 to production?", "dashboard_health", {"dashboard_id": 9}),
    Case("Сколько миграций ждёт дашборд 8?", "dashboard_health", {"dashboard_id": 8}),
    Case("Make a branch called q3-report for dashboard 2", "create_branch", {"dashboard_id": 2, "name": "q3-report"}),
    Case("Push dashboard 8 to production", "deploy_dashboard", {"dashboard_id": 8, "environment": "production"}),
    Case("Run migration 5 of dashboard 3", "execute_migration", {"dashboard_id": 3, "migration_id": 5}),
    Case(
        "Сохрани правки дашборда 7 с сообщением fix totals",
        "commit_changes",
        {"dashboard_id": 7, "message": "fix totals"},
    ),
    Case("What's the capital of France?", "none"),
    Case("Спокойной ночи!", "none"),
    Case("Should I commit before deploying?", "none"),
    Case("What does a migration do?", "none"),
]


TUNING_FIRST_FRESH = [
    # No tool.
    Case("Good afternoon!", "none"),
    Case("What's your name?", "none"),
    Case("How do I make a good chart?", "none"),
    Case("Thank you very much", "none"),
    Case("What time zone do you use?", "none"),
    Case("Доброе утро!", "none"),
    Case("Как тебя зовут?", "none"),
    Case("Что такое дашборд?", "none"),
    Case("Большое спасибо за помощь", "none"),
    Case("Расскажи что-нибудь интересное", "none"),
    # An action that waits for approval, named.
    Case("Deploy dashboard 14 to staging", "deploy_dashboard", {"dashboard_id": 14, "environment": "staging"}),
    Case(
        "Please release dashboard 6 to production", "deploy_dashboard", {"dashboard_id": 6, "environment": "production"}
    ),
    Case("Execute the pending migration on dashboard 11", "execute_migration", {"dashboard_id": 11}),
    Case("Commit the pending changes on dashboard 25", "commit_changes", {"dashboard_id": 25}),
    Case("Roll out dashboard 31 to production", "deploy_dashboard", {"dashboard_id": 31, "environment": "production"}),
    Case("Выкати дашборд 14 на стейджинг", "deploy_dashboard", {"dashboard_id": 14, "environment": "staging"}),
    Case("Задеплой дашборд 8 в продакшен", "deploy_dashboard", {"dashboard_id": 8, "environment": "production"}),
    Case("Примени миграцию дашборда 11", "execute_migration", {"dashboard_id": 11}),
    Case("Закоммить изменения в дашборде 6", "commit_changes", {"dashboard_id": 6}),
    Case("Опубликуй дашборд 3 в прод", "deploy_dashboard", {"dashboard_id": 3, "environment": "production"}),
    # About something such an action acts on: the tool that reads.
    Case("What migrations are pending on dashboard 17?", "dashboard_health", {"dashboard_id": 17}),
    Case("Has dashboard 6 been deployed to production?", "dashboard_health", {"dashboard_id": 6}),
    Case("Are there uncommitted changes on dashboard 12?", "dashboard_health", {"dashboard_id": 12}),
    Case("Can I deploy dashboard 5 to staging?", "dashboard_health", {"dashboard_id": 5}),
    Case("What would deploying dashboard 9 change?", "dashboard_health", {"dashboard_id": 9}),
    Case("Какие миграции ждут применения у дашборда 14?", "dashboard_health", {"dashboard_id": 14}),
    Case("Выкачен ли дашборд 3 в прод?", "dashboard_health", {"dashboard_id": 3}),
    Case("Есть ли незакоммиченные изменения у дашборда 20?", "dashboard_health", {"dashboard_id": 20}),
    Case("Можно ли развернуть дашборд 7 в продакшен?", "dashboard_health", {"dashboard_id": 7}),
    Case("Когда дашборд 42 последний раз деплоили?", "dashboard_health", {"dashboard_id": 42}),
    # The other tools.
    Case("Which dashboards belong to Olivia Chen?", "search_dashboards", mentions="olivia", within=OWNER),
    Case("List the deprecated dashboards", "search_dashboards", {"status": "deprecated"}),
    Case("Show me the health of dashboard 27", "dashboard_health", {"dashboard_id": 27}),
    Case("Create a branch named hotfix-1 for dashboard 4", "create_branch", {"dashboard_id": 4, "name": "hotfix-1"}),
    Case("Are any dashboards failing validation?", "search_dashboards", {"has_validation_problems": True}),
    Case("Найди дашборды Алексея Кузнецова", "search_dashboards", mentions="кузнецов", within=OWNER),
    Case("Покажи опубликованные дашборды", "search_dashboards", {"status": "published"}),
    Case("Какие ошибки у дашборда 33?", "dashboard_health", {"dashboard_id": 33}),
    Case("Создай ветку experiment для дашборда 9", "create_branch", {"dashboard_id": 9, "name": "experiment"}),
    Case("Какие дашборды без проблем валидации?", "search_dashboards", {"has_validation_problems": False}),
]


TUNING_SECOND_FRESH = [
    # No tool.
    Case("Hi there, how are you today?", "none"),
    Case("Can you recommend a good book?", "none"),
    Case("What's the difference between a KPI and a metric?", "none"),
    Case("I appreciate your help", "none"),
    Case("See you tomorrow", "none"),
    Case("Привет, как настроение?", "none"),
    Case("Что посоветуешь почитать?", "none"),
    Case("Чем KPI отличается от метрики?", "none"),
    Case("Ты очень помог, благодарю", "none"),
    Case("До завтра!", "none"),
    # An action that waits for approval, named.
    Case(
        "Deploy dashboard 18 to production now", "deploy_dashboard", {"dashboard_id": 18, "environment": "production"}
    ),
    Case("Push dashboard 22 to staging", "deploy_dashboard", {"dashboard_id": 22, "environment": "staging"}),
    Case("Run the next migration of dashboard 13", "execute_migration", {"dashboard_id": 13}),
    Case("Please commit dashboard 16's changes", "commit_changes", {"dashboard_id": 16}),
    Case("Ship dashboard 40 to prod", "deploy_dashboard", {"dashboard_id": 40, "environment": "production"}),
    Case("Разверни дашборд 18 на стейджинге", "deploy_dashboard", {"dashboard_id": 18, "environment": "staging"}),
    Case("Выложи дашборд 22 в продакшн", "deploy_dashboard", {"dashboard_id": 22, "environment": "production"}),
    Case("Запусти следующую миграцию дашборда 13", "execute_migration", {"dashboard_id": 13}),
    Case("Сохрани правки в дашборде 16", "commit_changes", {"dashboard_id": 16}),
    Case("Задеплой дашборд 40 на прод", "deploy_dashboard", {"dashboard_id": 40, "environment": "production"}),
    # About something such an action acts on: the tool that reads.
    Case("Is dashboard 18 ready to go to production?", "dashboard_health", {"dashboard_id": 18}),
    Case("How many migrations does dashboard 13 still need?", "dashboard_health", {"dashboard_id": 13}),
    Case("Does dashboard 16 have changes that nobody committed?", "dashboard_health", {"dashboard_id": 16}),
    Case("Was dashboard 22 deployed to staging?", "dashboard_health", {"dashboard_id": 22}),
    Case("Should dashboard 40 be deployed before its errors are fixed?", "dashboard_health", {"dashboard_id": 40}),
    Case("Готов ли дашборд 18 к выкатке в прод?", "dashboard_health", {"dashboard_id": 18}),
    Case("Сколько миграций осталось у дашборда 13?", "dashboard_health", {"dashboard_id": 13}),
    Case("Есть ли у дашборда 16 несохранённые правки?", "dashboard_health", {"dashboard_id": 16}),
    Case("Деплоился ли дашборд 22 на стейджинг?", "dashboard_health", {"dashboard_id": 22}),
    Case("Стоит ли выкатывать дашборд 40 с ошибками?", "dashboard_health", {"dashboard_id": 40}),
    # The other tools.
    Case("Search for dashboards about revenue", "search_dashboards", mentions="revenue"),
    Case("Show all draft dashboards", "search_dashboards", {"status": "draft"}),
    Case("Which dashboards does James Patel own?", "search_dashboards", mentions="patel", within=OWNER),
    Case("Check dashboard 12", "dashboard_health", {"dashboard_id": 12}),
    Case("Start a new branch called redesign on dashboard 8", "create_branch", {"dashboard_id": 8, "name": "redesign"}),
    Case("Найди дашборды про отток", "search_dashboards", mentions="отток"),
    Case("Какие дашборды устарели?", "search_dashboards", {"status": "deprecated"}),
    Case("Покажи дашборды с тегом marketing", "search_dashboards", mentions="marketing", within=TAG),
    Case("Как дела у дашборда 12?", "dashboard_health", {"dashboard_id": 12}),
    Case("Сделай ветку для дашборда 8", "create_branch", {"dashboard_id": 8}, more=True),
]


FRESH = [
    # No tool.
    Case("Good evening, assistant", "none"),
    Case("Who made you?", "none"),
    Case("Explain what a data warehouse is", "none"),
    Case("That was helpful, cheers", "none"),
    Case("Have a nice weekend!", "none"),
    Case("Добрый вечер!", "none"),
    Case("Кто тебя создал?", "none"),
    Case("Объясни, что такое хранилище данных", "none"),
    Case("Это было полезно, спасибо", "none"),
    Case("Хороших выходных!", "none"),
    # An action that waits for approval, named.
    Case(
        "Go ahead and deploy dashboard 21 to staging",
        "deploy_dashboard",
        {"dashboard_id": 21, "environment": "staging"},
    ),
    Case("Promote dashboard 9 to production", "deploy_dashboard", {"dashboard_id": 9, "environment": "production"}),
    Case("Apply the next pending migration for dashboard 30", "execute_migration", {"dashboard_id": 30}),
    Case("Commit everything on dashboard 2", "commit_changes", {"dashboard_id": 2}),
    Case("Release dashboard 17 to staging please", "deploy_dashboard", {"dashboard_id": 17, "environment": "staging"}),
    Case("Выкатывай дашборд 21 на стейджинг", "deploy_dashboard", {"dashboard_id": 21, "environment": "staging"}),
    Case("Разверни дашборд 9 в продакшене", "deploy_dashboard", {"dashboard_id": 9, "environment": "production"}),
    Case("Выполни следующую миграцию для дашборда 30", "execute_migration", {"dashboard_id": 30}),
    Case("Закоммить всё в дашборде 2", "commit_changes", {"dashboard_id": 2}),
    Case(
        "Задеплой, пожалуйста, дашборд 17 на стейджинг",
        "deploy_dashboard",
        {"dashboard_id": 17, "environment": "staging"},
    ),
    # About something such an action acts on: the tool that reads.
    Case("Is there anything blocking dashboard 21 from production?", "dashboard_health", {"dashboard_id": 21}),
    Case("Which migrations are still waiting on dashboard 30?", "dashboard_health", {"dashboard_id": 30}),
    Case("Has anyone committed the changes on dashboard 2?", "dashboard_health", {"dashboard_id": 2}),
    Case("When was dashboard 9 last deployed?", "dashboard_health", {"dashboard_id": 9}),
    Case("Could dashboard 17 break if we deploy it?", "dashboard_health", {"dashboard_id": 17}),
    Case("Что мешает выкатить дашборд 21 в прод?", "dashboard_health", {"dashboard_id": 21}),
    Case("Какие миграции ещё не применены у дашборда 30?", "dashboard_health", {"dashboard_id": 30}),
    Case("Закоммичены ли изменения дашборда 2?", "dashboard_health", {"dashboard_id": 2}),
    Case("Когда дашборд 9 последний раз выкатывали?", "dashboard_health", {"dashboard_id": 9}),
    Case("Сломается ли дашборд 17, если его задеплоить?", "dashboard_health", {"dashboard_id": 17}),
    # The other tools.
    Case("Look for dashboards about churn", "search_dashboards", mentions="churn"),
    Case("Which dashboards are published?", "search_dashboards", {"status": "published"}),
    Case("Dashboards owned by Daniel Brooks", "search_dashboards", mentions="brooks", within=OWNER),
    Case("Give me a health check of dashboard 3", "dashboard_health", {"dashboard_id": 3}),
    Case("Branch dashboard 11 as fix-labels", "create_branch", {"dashboard_id": 11, "name": "fix-labels"}),
    Case("Найди дашборды про логистику", "search_dashboards", mentions="логист"),
    Case("Какие дашборды ещё черновики?", "search_dashboards", {"status": "draft"}),
    Case("Дашборды Дмитрия Орлова", "search_dashboards", mentions="орлов", within=OWNER),
    Case("Проверь дашборд 3", "dashboard_health", {"dashboard_id": 3}),
    Case("Создай ветку fix-labels для дашборда 11", "create_branch", {"dashboard_id": 11, "name": "fix-labels"}),
]


@dataclass
class Score:
    name: str
    cases: list[Case]
    right_tool: int = 0
    right_args: int = 0
    # A tool that waits for the user's approval, chosen when another tool or none was asked for.
    dangerous_unasked: int = 0
    # Answered with a question: the two tools scored too close to tell, or a value the tool needs was not said.
    asked_back: int = 0
    lines: list[str] = field(default_factory=list)
    # From the request to the first thing a person would see: a tool card, or the answer's first words.
    first_event: list[float] = field(default_factory=list)

    def figures(self) -> list[Any]:
        total = len(self.cases)
        return [
            total,
            f"{self.right_tool}/{total}",
            f"{self.right_args}/{total}",
            self.dangerous_unasked,
            self.asked_back,
            f"{statistics.median(self.first_event):.2f}",
            f"{max(self.first_event):.2f}",
        ]

    def report(self) -> str:
        summary = (
            f"{self.name}: tool right {self.right_tool}/{len(self.cases)}, tool and key arguments right "
            f"{self.right_args}/{len(self.cases)}, dangerous tool proposed unasked {self.dangerous_unasked}, asked "
            f"back {self.asked_back}; first event after {statistics.median(self.first_event):.2f} s (median), "
            f"{max(self.first_event):.2f} s at most"
        )
        text = "\n".join([summary, *self.lines])
        print(f"\n{text}")
        return text


def table_line(first: str, cells: list[Any]) -> str:
    return f"{first:<24}" + "".join(f"{cell!s:>{len(column) + 3}}" for cell, column in zip(cells, COLUMNS, strict=True))


async def first_event_and_answer(provider: LocalProvider, params: ProviderChatParams) -> tuple[float, Any]:
    started = time.monotonic()
    first = None
    async with aclosing(provider.stream(params)) as items:
        async for item in items:
            first = first if first is not None else time.monotonic() - started
            if isinstance(item, ProviderChatResponse):
                return first, item
    raise AssertionError("the stream ended without an answer")


def valid(tool: Tool, args: dict[str, Any]) -> bool:
    try:
        tool.validate(args)
    except ToolArgumentsError:
        return False
    return True


async def evaluate(provider: LocalProvider, name: str, cases: list[Case], summary: list[str]) -> Score:
    tools, system_prompt = offered(), build_system_prompt()
    score = Score(name, cases)
    for case in cases:
        # max_tokens=8: after "none" a few words show the first event; the rest of the answer is not measured.
        params = ProviderChatParams(
            messages=[user(case.request)], system_prompt=system_prompt, tools=tools, max_tokens=8
        )
        first, answer = await first_event_and_answer(provider, params)
        score.first_event.append(first)
        call = answer.tool_calls[0] if answer.tool_calls else {"name": "none", "args": {}}
        call = {**call, "args": said(call["name"], call["args"])}
        asked = not answer.tool_calls and answer.content.startswith(("I am not sure", "Я не уверен", "Which", "Какое"))
        tool_ok, args_ok = case.judge(call["name"], call["args"])
        if asked:
            tool_ok = args_ok = False
        chosen = registry.find(call["name"])
        # A call its tool refuses (a branch named "Создай ветку") fails in front of the person, extra or not.
        args_ok = args_ok and (chosen is None or valid(chosen, call["args"]))
        score.right_tool += tool_ok
        score.right_args += args_ok
        score.asked_back += asked
        score.dangerous_unasked += call["name"] != case.tool and chosen is not None and chosen.requires_confirmation
        mark = "ok  " if args_ok else ("args" if tool_ok else ("ASKS" if asked else "TOOL"))
        shown = f"{call['name']} {call['args']}" if answer.tool_calls else f"(words) {answer.content[:40]!r}"
        score.lines.append(f"{mark} {first:5.2f}s  {case.request[:48]:<48} -> {shown}")
    if not summary:
        summary.append(table_line("request set", list(COLUMNS)))
    summary.append(table_line(name, score.figures()))
    return score


async def test_the_tuning_sets_route_right(provider: LocalProvider, summary: list[str]):
    """Floors a little under what the packaged model reaches (134 and 134 of 139 when last tuned), for llama.cpp
    builds that round differently; the reported requests must be right, and nothing dangerous proposed unasked."""
    scores = [
        await evaluate(provider, "tuning", TUNING, summary),
        await evaluate(provider, "tuning, unlike examples", TUNING_UNLIKE_EXAMPLES, summary),
        await evaluate(provider, "tuning, former held-out", TUNING_FORMER_HELD_OUT, summary),
        await evaluate(provider, "tuning, first fresh set", TUNING_FIRST_FRESH, summary),
        await evaluate(provider, "tuning, second fresh set", TUNING_SECOND_FRESH, summary),
    ]
    text = "\n\n".join(score.report() for score in scores)
    assert sum(score.right_tool for score in scores) >= 124, text
    assert sum(score.right_args for score in scores) >= 121, text
    assert sum(score.dangerous_unasked for score in scores) == 0, text
    reported = len(REPORTED) + len(REPORTED_WHOLE_CATALOGUE)
    assert all(line.startswith("ok") for line in scores[0].lines[:reported]), text


async def test_fresh_requests_meet_the_targets(provider: LocalProvider, summary: list[str]):
    """The targets, not today's result: right tool at least 90%, right key arguments at least 80%, and no tool
    that waits for approval proposed when it was not asked for. Measured once when written: 38, 37 and 0 of 40."""
    score = await evaluate(provider, "fresh", FRESH, summary)
    text = score.report()
    assert score.dangerous_unasked == 0, text
    assert score.right_tool >= 0.9 * len(FRESH), text
    assert score.right_args >= 0.8 * len(FRESH), text
