"""carry_out: the one way a tool call is carried out, and every outcome it can have."""

from __future__ import annotations

import asyncio
from typing import Literal

import pytest
from pydantic import Field

from agentchat.agent.calls import (
    NeedsConfirmation,
    Outcome,
    Started,
    ToolAccess,
    ToolOutcome,
    call_tool,
    carry_out,
    carry_out_decided,
    with_every_result,
)
from tools.registry import ToolArgs, ToolContext, ToolRegistry


class DeployArgs(ToolArgs):
    dashboard_id: int = Field(ge=1)
    environment: Literal["staging", "production"] = "staging"


class Ran:
    """What the tools really did, and who may use what."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, dict]] = []
        self.allowed = {"deploy", "explode", "linger", "count"}


@pytest.fixture
def ran() -> Ran:
    return Ran()


@pytest.fixture
def access(ran) -> ToolAccess:
    registry = ToolRegistry()

    @registry.tool(name="deploy", requires_confirmation=True)
    def deploy(args: DeployArgs, ctx: ToolContext) -> dict:
        """Deploy a dashboard."""
        ran.calls.append(("deploy", args.model_dump()))
        return {"deployed": args.dashboard_id, "to": args.environment}

    @registry.tool(name="count")
    def count(args: DeployArgs, ctx: ToolContext) -> int:
        """Count something."""
        ran.calls.append(("count", args.model_dump()))
        return 3

    @registry.tool(name="explode")
    def explode(args: DeployArgs, ctx: ToolContext) -> None:
        """Fail."""
        raise RuntimeError("the disk is full")

    @registry.tool(name="linger", timeout=0.05)
    async def linger(args: DeployArgs, ctx: ToolContext) -> None:
        """Take too long."""
        await asyncio.sleep(5)

    async def permitted(tool) -> bool:
        return tool.name in ran.allowed

    ctx = ToolContext(user=None)

    async def execute(tool, args, call_id):
        return await call_tool(tool, args, ctx)

    return ToolAccess(lookup=registry.find, permitted=permitted, execute=execute)


async def steps(access, name: str, args, **options) -> list:
    return [step async for step in carry_out(access, "call_1", name, args, **options)]


async def test_a_safe_call_starts_with_its_normalised_arguments_and_is_done(access, ran):
    started, outcome = await steps(access, "count", {"dashboard_id": 4})
    assert isinstance(started, Started) and started.args == {"dashboard_id": 4, "environment": "staging"}
    assert outcome == ToolOutcome(Outcome.DONE, output=3)
    assert outcome.ok and outcome.content == "3"
    assert ran.calls == [("count", {"dashboard_id": 4, "environment": "staging"})]


async def test_a_dangerous_call_stops_at_the_gate_with_what_would_run(access, ran):
    [gate] = await steps(access, "deploy", {"dashboard_id": 42, "environment": "production"})
    assert isinstance(gate, NeedsConfirmation)
    assert gate.tool.name == "deploy" and gate.args == {"dashboard_id": 42, "environment": "production"}
    assert ran.calls == []


async def test_a_decided_call_runs_past_the_gate(access, ran):
    started, outcome = await steps(access, "deploy", {"dashboard_id": 42}, decided=True)
    assert started.args == {"dashboard_id": 42, "environment": "staging"}
    assert outcome.outcome == Outcome.DONE and outcome.output == {"deployed": 42, "to": "staging"}
    assert ran.calls == [("deploy", {"dashboard_id": 42, "environment": "staging"})]


@pytest.mark.parametrize(
    ("args", "named"),
    [
        ({"dashboard_id": True, "environment": "production"}, "dashboard_id: expected a whole number, got true"),
        ({"dashboard_id": "42"}, "dashboard_id"),
        ({"dashboard_id": 42, "env": "production"}, "env: unknown argument"),
        ({}, "dashboard_id"),
        ("42", "expected a JSON object"),
    ],
)
async def test_invalid_arguments_are_refused_before_the_gate_naming_the_field(access, ran, args, named):
    [outcome] = await steps(access, "deploy", args, decided=True)
    assert outcome.outcome == Outcome.INVALID and named in outcome.error
    assert outcome.content.startswith("Error: Invalid arguments for deploy")
    assert ran.calls == []


async def test_a_tool_the_user_may_not_use_now_is_denied_before_anything_else(access, ran):
    ran.allowed.discard("deploy")
    [outcome] = await steps(access, "deploy", {"dashboard_id": True}, decided=True)
    assert outcome == ToolOutcome.denied("deploy")
    assert outcome.outcome == Outcome.DENIED and outcome.error == "permission denied: you may not use deploy."
    assert ran.calls == []


async def test_a_tool_that_no_longer_exists_is_unavailable(access):
    [outcome] = await steps(access, "launch_rockets", {}, decided=True)
    assert outcome.outcome == Outcome.UNAVAILABLE and outcome.error == "launch_rockets is no longer available."


async def test_a_tool_that_raises_or_times_out_is_an_error_not_a_crash(access):
    _, raised = await steps(access, "explode", {"dashboard_id": 1})
    assert raised.outcome == Outcome.ERROR and raised.error == "explode failed: the disk is full"
    _, late = await steps(access, "linger", {"dashboard_id": 1})
    assert late.outcome == Outcome.ERROR and "did not finish within 0.05 s" in late.error


async def test_the_worker_takes_a_call_straight_to_its_outcome(access, ran):
    outcome = await carry_out_decided(access, "call_1", "deploy", {"dashboard_id": 5, "environment": "production"})
    assert outcome.output == {"deployed": 5, "to": "production"}
    ran.allowed.clear()
    assert (await carry_out_decided(access, "call_2", "deploy", {"dashboard_id": 5})).outcome == Outcome.DENIED


def test_the_outcomes_that_did_not_run_say_why_in_words_the_model_reads():
    assert ToolOutcome.rejected("not on Fridays").content == "Error: rejected by the user. Reason: not on Fridays"
    assert ToolOutcome.rejected().content == "Error: rejected by the user."
    assert ToolOutcome.cancelled("cancelled by the user").outcome == Outcome.CANCELLED
    unknown = ToolOutcome.unknown("deploy_dashboard")
    assert unknown.outcome == Outcome.UNKNOWN and not unknown.ok
    assert "stopped while deploy_dashboard was running" in unknown.content and "Check before" in unknown.content


def call(call_id: str, name: str = "count") -> dict:
    return {"id": call_id, "name": name, "args": {}}


def test_every_tool_call_reaches_the_provider_with_its_result():
    whole = [
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": "", "tool_calls": [call("a"), call("b")]},
        {"role": "tool", "tool_call_id": "a", "name": "count", "content": "1"},
        {"role": "tool", "tool_call_id": "b", "name": "count", "content": "2"},
        {"role": "assistant", "content": "done"},
    ]
    assert with_every_result(whole) == whole

    orphaned = [
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": "", "tool_calls": [call("a"), call("b", "deploy")]},
        {"role": "tool", "tool_call_id": "a", "name": "count", "content": "1"},
        {"role": "user", "content": "and now?"},
        {"role": "tool", "tool_call_id": "zzz", "name": "count", "content": "a result without its call"},
    ]
    assert with_every_result(orphaned) == [
        orphaned[0],
        orphaned[1],
        orphaned[2],
        {
            "role": "tool",
            "tool_call_id": "b",
            "name": "deploy",
            "content": "Error: no result was recorded.",
            "outcome": "unknown",
        },
        orphaned[3],
    ]
