"""How well the local model (the packaged SmolLM2-135M) picks the demo's tools and their arguments: `make eval`.

Fixed requests, in English and Russian, each with the tool (or "none") and the key arguments it should get;
decisions are deterministic. A table of the figures is printed at the end; `-s` shows every decision.

The sets are named for how they were used. TUNING_SET is what the tools' examples were written for and the
routing was tuned on. TUNING_SET_UNLIKE_EXAMPLES was written before the examples and kept unlike them, but
how many examples are shown, how much likeness weighs and the decision's instructions were chosen on both sets
together (34 requests). HELD_OUT was written after all of that and has never been used to tune anything; its
floors were set a little under its first measurement.

Letting the model write the whole call (the provider before examples and scoring) got 3 of the 20 of TUNING_SET
right, tool and arguments, and 3 of the 14 tools of TUNING_SET_UNLIKE_EXAMPLES (1 with its arguments); then
20 and 20, 11 and 10.
"""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass, field
from typing import Any

from agentchat.agent.prompts import build_system_prompt
from agentchat.agent.providers import ProviderChatParams
from agentchat.agent.providers.local import LocalProvider
from tests.agent.test_local_routing import offered, user
from tools.registry import registry

# The summary table: request set, then its figures.
COLUMNS = ("requests", "tool right", "key args right", "dangerous unasked", "median s")


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


# The four first reported (the first is README's example and, like the fourth, one of the tool's own).
REPORTED = [
    Case("Which dashboards have validation problems?", "search_dashboards", {"has_validation_problems": True}),
    Case("Create a branch for dashboard 42", "create_branch", {"dashboard_id": 42}, more=True),
    Case("Deploy dashboard 42 to production", "deploy_dashboard", {"dashboard_id": 42, "environment": "production"}),
    Case("покажи дашборды с проблемами валидации", "search_dashboards", {"has_validation_problems": True}),
]
TUNING_SET = [
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
TUNING_SET_UNLIKE_EXAMPLES = [
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
HELD_OUT = [
    Case("Which dashboards are still drafts?", "search_dashboards", {"status": "draft"}),
    Case("Show me Maria Ivanova's dashboards", "search_dashboards", mentions="ivanova"),
    Case("Есть ли дашборды про продажи?", "search_dashboards", mentions="продаж"),
    Case("Does dashboard 4 have any errors?", "dashboard_health", {"dashboard_id": 4}),
    Case("Is it safe to deploy dashboard 9 to production?", "dashboard_health", {"dashboard_id": 9}),
    Case("Сколько миграций ждёт дашборд 8?", "dashboard_health", {"dashboard_id": 8}),
    Case("Make a branch called q3-report for dashboard 2", "create_branch", {"dashboard_id": 2, "name": "q3-report"}),
    Case("Push dashboard 8 to production", "deploy_dashboard", {"dashboard_id": 8, "environment": "production"}),
    Case("Run migration 5 of dashboard 3", "execute_migration", {"dashboard_id": 3, "migration_id": 5}),
    Case("Сохрани правки дашборда 7 с сообщением fix totals", "commit_changes", {"dashboard_id": 7}, more=True),
    Case("What's the capital of France?", "none"),
    Case("Спокойной ночи!", "none"),
    Case("Should I commit before deploying?", "none"),
    Case("What does a migration do?", "none"),
]


@dataclass
class Score:
    name: str
    cases: list[Case]
    right_tool: int = 0
    right_args: int = 0
    # A tool that waits for the user's approval, chosen when another tool or none was asked for.
    dangerous_unasked: int = 0
    lines: list[str] = field(default_factory=list)
    seconds: list[float] = field(default_factory=list)

    def row(self) -> str:
        total = len(self.cases)
        figures = [total, f"{self.right_tool}/{total}", f"{self.right_args}/{total}", self.dangerous_unasked]
        return table_line(self.name, [*figures, f"{statistics.median(self.seconds):.2f}"])

    def report(self) -> str:
        summary = (
            f"{self.name}: tool right {self.right_tool}/{len(self.cases)}, tool and key arguments right "
            f"{self.right_args}/{len(self.cases)}, dangerous tool proposed unasked {self.dangerous_unasked}; "
            f"a decision took {statistics.median(self.seconds):.2f} s (median), {max(self.seconds):.2f} s at most"
        )
        text = "\n".join([summary, *self.lines])
        print(f"\n{text}")
        return text


def table_line(first: str, cells: list[Any]) -> str:
    return f"{first:<28}" + "".join(f"{cell!s:>{len(column) + 3}}" for cell, column in zip(cells, COLUMNS, strict=True))


async def evaluate(provider: LocalProvider, name: str, cases: list[Case], summary: list[str]) -> Score:
    tools, system_prompt = offered(), build_system_prompt()
    score = Score(name, cases)
    for case in cases:
        started = time.monotonic()
        # max_tokens=1: after "none" the answer itself is not what is measured.
        params = ProviderChatParams(
            messages=[user(case.request)], system_prompt=system_prompt, tools=tools, max_tokens=1
        )
        answer = await provider.chat(params)
        score.seconds.append(time.monotonic() - started)
        call = answer.tool_calls[0] if answer.tool_calls else {"name": "none", "args": {}}
        tool_ok, args_ok = case.judge(call["name"], call["args"])
        score.right_tool += tool_ok
        score.right_args += args_ok
        chosen = registry.find(call["name"])
        score.dangerous_unasked += call["name"] != case.tool and chosen is not None and chosen.requires_confirmation
        mark = "ok  " if args_ok else ("args" if tool_ok else "TOOL")
        request = case.request[:48]
        score.lines.append(f"{mark} {score.seconds[-1]:5.2f}s  {request:<48} -> {call['name']} {call['args']}")
    if not summary:
        summary.append(table_line("request set", list(COLUMNS)))
    summary.append(score.row())
    return score


async def test_the_tuning_set_gets_the_right_tool_and_arguments(provider: LocalProvider, summary: list[str]):
    score = await evaluate(provider, "tuning set", TUNING_SET, summary)
    text = score.report()
    # Floors a little under what the packaged model reaches (20 and 20 of 20), for llama.cpp builds that round
    # differently; the reported four must be right.
    assert score.right_tool >= 18 and score.right_args >= 17, text
    assert all(line.startswith("ok") for line in score.lines[: len(REPORTED)]), text


async def test_the_tuning_set_unlike_the_examples_mostly_routes_right(provider: LocalProvider, summary: list[str]):
    # Measured when the examples were chosen: 11 of 14 tools and 10 of 14 with their arguments.
    score = await evaluate(provider, "tuning set, unlike examples", TUNING_SET_UNLIKE_EXAMPLES, summary)
    text = score.report()
    assert score.right_tool >= 11 and score.right_args >= 10, text


async def test_held_out_requests_stay_above_their_floors(provider: LocalProvider, summary: list[str]):
    # First measured: 7 of 14 tools, 4 of 14 with their arguments, and 5 tools that wait for approval proposed
    # unasked. Nothing has been tuned on it; whoever tunes on it must write a new held-out set.
    score = await evaluate(provider, "held out", HELD_OUT, summary)
    text = score.report()
    assert score.right_tool >= 6 and score.right_args >= 3, text
