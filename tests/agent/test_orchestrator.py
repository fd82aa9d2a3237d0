"""AgentRun with the real OpenAICompatibleProvider against the fake server (the loop, tool
argument validation, the round limit)."""

from __future__ import annotations

import asyncio
import json
import threading
import time

import pytest

from agentchat.agent.calls import ToolAccess
from agentchat.agent.events import (
    AssistantMessage,
    ConfirmRequired,
    Notice,
    RoundRetry,
    RunFinished,
    Token,
    ToolEnd,
    ToolError,
    ToolStart,
)
from agentchat.agent.orchestrator import LIMIT_MESSAGE, AgentRun
from agentchat.agent.providers import get_provider
from tests.fake_provider import Reply
from tools.registry import ToolArgs, ToolContext, ToolRegistry

KEY = "sk-test-SECRET-123"
SYSTEM_PROMPT = "You are the test agent."


class TranscribeArgs(ToolArgs):
    assetId: str | None = None


class AssetArgs(ToolArgs):
    assetId: str


class DeployArgs(ToolArgs):
    dashboard_id: int
    environment: str = "staging"


class User:
    """Our own ToolContext user: only `has_perm` matters to the engine."""

    def __init__(self, *perms: str):
        self.perms = set(perms)

    def has_perm(self, perm: str) -> bool:
        return perm in self.perms


@pytest.fixture
async def provider(openai_config):
    provider = get_provider(openai_config)
    yield provider
    await provider.close()


@pytest.fixture
def registry():
    return ToolRegistry()


@pytest.fixture
def calls():
    """What the tools were really called with, in order."""
    return []


@pytest.fixture
def transcribe(registry, calls):
    @registry.tool
    def transcribe_video(args: TranscribeArgs, ctx: ToolContext) -> dict:
        """Transcribe a video asset."""
        calls.append(("transcribe_video", args.assetId))
        return {"transcript": "Hello world", "assetId": args.assetId}

    return transcribe_video


@pytest.fixture
def fetch(registry, calls):
    @registry.tool
    async def fetch_asset(args: AssetArgs, ctx: ToolContext) -> dict:
        """Fetch one media asset by id."""
        calls.append(("fetch_asset", args.assetId))
        return {"assetId": args.assetId, "duration_s": 12}

    return fetch_asset


@pytest.fixture
def deploy(registry, calls):
    @registry.tool(requires_confirmation=True, permission="dashboards.deploy")
    def deploy_dashboard(args: DeployArgs, ctx: ToolContext) -> str:
        """Deploy a dashboard to an environment."""
        calls.append(("deploy_dashboard", args.dashboard_id))
        return "deployed"

    return deploy_dashboard


def start(provider, registry, *, user=None, max_rounds: int = 8) -> AgentRun:
    return AgentRun(
        provider=provider,
        tools=registry.permitted(user),
        access=ToolAccess.direct(registry, ToolContext(user=user)),
        system_prompt=SYSTEM_PROMPT,
        max_rounds=max_rounds,
    )


async def run_agent(provider, registry, text: str = "Transcribe my video", **options) -> list:
    run = start(provider, registry, **options)
    return [event async for event in run.events([{"role": "user", "content": text}])]


def kinds(events) -> list[str]:
    """Event types in order, a run of tokens shown once."""
    out: list[str] = []
    for event in events:
        if not (event.type == "token" and out and out[-1] == "token"):
            out.append(event.type)
    return out


def of(events, cls) -> list:
    return [event for event in events if isinstance(event, cls)]


def tool_messages(request) -> list[dict]:
    return [message for message in request.messages if message["role"] == "tool"]


# --- the loop --------------------------------------------------------------------


async def test_happy_path_without_tool_calls(provider, registry, transcribe, fake_llm):
    fake_llm.script(Reply(text="Hello! How can I help you today?"))
    run = start(provider, registry)

    events = [event async for event in run.events([{"role": "user", "content": "Hi"}])]

    assert kinds(events) == ["token", "assistant_message", "run_finished"]
    tokens = of(events, Token)
    assert len(tokens) > 1
    assert "".join(token.delta for token in tokens) == "Hello! How can I help you today?"
    [message] = of(events, AssistantMessage)
    assert message.content == "Hello! How can I help you today?"
    assert message.tool_calls == []
    assert events[-1].status == "completed"
    assert events[-1].error == ""
    assert [event.seq for event in events] == list(range(1, len(events) + 1))
    assert {event.run_id for event in events} == {run.run_id}
    assert events[0].frame() == {"type": "token", "run_id": run.run_id, "seq": 1, "delta": tokens[0].delta}
    [request] = fake_llm.requests
    assert request.messages == [
        {"role": "system", "content": SYSTEM_PROMPT},
        {"role": "user", "content": "Hi"},
    ]
    assert [tool["function"]["name"] for tool in request.tools] == ["transcribe_video"]


async def test_tool_call_then_final_answer(provider, registry, transcribe, calls, fake_llm):
    fake_llm.script(
        Reply(tool_calls=[("transcribe_video", {"assetId": "vid-1"}, "call_t1")]),
        Reply(text="Here is the transcription: Hello world"),
    )

    events = await run_agent(provider, registry)

    assert kinds(events) == [
        "assistant_message",
        "tool_start",
        "tool_end",
        "token",
        "assistant_message",
        "run_finished",
    ]
    first, final = of(events, AssistantMessage)
    assert first.tool_calls == [{"id": "call_t1", "name": "transcribe_video", "args": {"assetId": "vid-1"}}]
    [started] = of(events, ToolStart)
    assert (started.tool_call_id, started.tool, started.input) == ("call_t1", "transcribe_video", {"assetId": "vid-1"})
    [ended] = of(events, ToolEnd)
    assert ended.tool_call_id == "call_t1"
    assert ended.output == {"transcript": "Hello world", "assetId": "vid-1"}
    assert calls == [("transcribe_video", "vid-1")]
    assert final.content == "Here is the transcription: Hello world"
    assert events[-1].status == "completed"

    assert len(fake_llm.requests) == 2
    system, user, assistant, tool = fake_llm.requests[1].messages
    assert system["role"] == "system"
    assert user == {"role": "user", "content": "Transcribe my video"}
    assert assistant["role"] == "assistant"
    assert assistant["content"] is None
    [wire_call] = assistant["tool_calls"]
    assert wire_call["id"] == "call_t1"
    assert wire_call["function"]["name"] == "transcribe_video"
    assert json.loads(wire_call["function"]["arguments"]) == {"assetId": "vid-1"}
    assert tool["tool_call_id"] == "call_t1"
    assert json.loads(tool["content"]) == {"transcript": "Hello world", "assetId": "vid-1"}


async def test_a_tool_that_raises_becomes_a_tool_error_and_the_loop_goes_on(provider, registry, fake_llm):
    @registry.tool
    def transcribe_video(args: TranscribeArgs, ctx: ToolContext) -> dict:
        """Transcribe a video asset."""
        raise RuntimeError("codec not supported")

    fake_llm.script(
        Reply(tool_calls=[("transcribe_video", {}, "call_t1")]),
        Reply(text="Sorry, that video uses a codec I cannot read."),
    )

    events = await run_agent(provider, registry)

    assert kinds(events) == [
        "assistant_message",
        "tool_start",
        "tool_error",
        "token",
        "assistant_message",
        "run_finished",
    ]
    [error] = of(events, ToolError)
    assert error.tool_call_id == "call_t1"
    assert error.outcome == "error"
    assert "codec not supported" in error.error
    assert events[-1].status == "completed"
    [tool] = tool_messages(fake_llm.requests[1])
    assert tool["tool_call_id"] == "call_t1"
    assert tool["content"].startswith("Error: ")
    assert "codec not supported" in tool["content"]


# --- tool argument validation --------------------------------------------------------------


@pytest.mark.parametrize("args", [{}, {"assetId": 123}], ids=["missing", "mistyped"])
async def test_invalid_arguments_name_the_field_and_the_tool_does_not_run(
    provider, registry, fetch, calls, fake_llm, args
):
    fake_llm.script(Reply(tool_calls=[("fetch_asset", args, "call_f1")]), Reply(text="I need an asset id."))

    events = await run_agent(provider, registry)

    assert kinds(events) == ["assistant_message", "tool_error", "token", "assistant_message", "run_finished"]
    [error] = of(events, ToolError)
    assert error.tool_call_id == "call_f1"
    assert error.outcome == "invalid"
    assert "assetId" in error.error
    assert calls == []
    [tool] = tool_messages(fake_llm.requests[1])
    assert tool["content"].startswith("Error: ")
    assert "assetId" in tool["content"]
    assert events[-1].status == "completed"


async def test_no_required_parameters_and_empty_arguments_runs(provider, registry, transcribe, calls, fake_llm):
    fake_llm.script(Reply(tool_calls=[("transcribe_video", {})]), Reply(text="Done."))

    events = await run_agent(provider, registry)

    [ended] = of(events, ToolEnd)
    assert ended.output == {"transcript": "Hello world", "assetId": None}
    assert calls == [("transcribe_video", None)]
    assert not of(events, ToolError)
    assert events[-1].status == "completed"


# --- the round limit -------------------------------------------------------------------


async def test_the_cap_stops_the_run_after_eight_rounds(provider, registry, transcribe, calls, fake_llm):
    fake_llm.script(*[Reply(tool_calls=[("transcribe_video", {"assetId": f"vid-{n}"})]) for n in range(12)])

    events = await run_agent(provider, registry, max_rounds=8)

    assert len(fake_llm.requests) == 8
    assert len(calls) == 8
    limit, finished = events[-2:]
    assert isinstance(limit, AssistantMessage)
    assert limit.content == LIMIT_MESSAGE == "Reached maximum iteration limit"
    assert limit.tool_calls == []
    assert limit.stopped == "The agent used all of its 8 steps before finishing."
    assert isinstance(finished, RunFinished)
    assert finished.status == "iteration_limit"
    assert [event.seq for event in events] == list(range(1, len(events) + 1))


async def test_finishing_within_the_cap(provider, registry, transcribe, calls, fake_llm):
    fake_llm.script(
        Reply(tool_calls=[("transcribe_video", {"assetId": "a"})]),
        Reply(tool_calls=[("transcribe_video", {"assetId": "b"})]),
        Reply(text="Both transcribed."),
    )

    events = await run_agent(provider, registry, max_rounds=8)

    assert len(fake_llm.requests) == 3
    assert calls == [("transcribe_video", "a"), ("transcribe_video", "b")]
    assert [message.content for message in of(events, AssistantMessage)] == ["", "", "Both transcribed."]
    assert all(LIMIT_MESSAGE not in message.content for message in of(events, AssistantMessage))
    assert events[-1].status == "completed"


# --- more than one call, confirmation, permission ----------------------------------------------------


async def test_two_calls_in_one_round_run_and_report_in_call_order(provider, registry, calls, fake_llm):
    @registry.tool
    async def slow_lookup(args: AssetArgs, ctx: ToolContext) -> str:
        """Look an asset up, slowly."""
        await asyncio.sleep(0.05)
        calls.append(("slow_lookup", args.assetId))
        return f"slow {args.assetId}"

    @registry.tool
    def quick_lookup(args: AssetArgs, ctx: ToolContext) -> str:
        """Look an asset up, quickly."""
        calls.append(("quick_lookup", args.assetId))
        return f"quick {args.assetId}"

    fake_llm.script(
        Reply(tool_calls=[("slow_lookup", {"assetId": "a"}, "call_1"), ("quick_lookup", {"assetId": "b"}, "call_2")]),
        Reply(text="Both found."),
    )

    events = await run_agent(provider, registry)

    assert calls == [("slow_lookup", "a"), ("quick_lookup", "b")]
    in_order = [("call_1", "slow a"), ("call_2", "quick b")]
    assert [(end.tool_call_id, end.output) for end in of(events, ToolEnd)] == in_order
    assert [(m["tool_call_id"], m["content"]) for m in tool_messages(fake_llm.requests[1])] == in_order
    assert events[-1].status == "completed"


async def test_a_dangerous_tool_waits_for_confirmation(provider, registry, transcribe, deploy, calls, fake_llm):
    user = User("dashboards.deploy")
    fake_llm.script(
        Reply(
            tool_calls=[
                ("deploy_dashboard", {"dashboard_id": 7, "environment": "prod"}, "call_d"),
                ("transcribe_video", {"assetId": "vid-1"}, "call_t"),
            ]
        )
    )

    events = await run_agent(provider, registry, user=user)

    assert kinds(events) == ["assistant_message", "confirm_required", "tool_start", "tool_end", "run_finished"]
    [confirm] = of(events, ConfirmRequired)
    assert (confirm.tool_call_id, confirm.tool) == ("call_d", "deploy_dashboard")
    assert confirm.input == {"dashboard_id": 7, "environment": "prod"}
    assert calls == [("transcribe_video", "vid-1")]
    assert events[-1].status == "awaiting_confirmation"
    assert len(fake_llm.requests) == 1


async def test_a_tool_the_user_may_not_use_is_hidden_and_refused(provider, registry, transcribe, fake_llm, calls):
    @registry.tool(permission="dashboards.delete")
    def delete_dashboard(args: DeployArgs, ctx: ToolContext) -> str:
        """Delete a dashboard."""
        calls.append(("delete_dashboard", args.dashboard_id))
        return "deleted"

    fake_llm.script(
        Reply(tool_calls=[("delete_dashboard", {"dashboard_id": 7}, "call_x")]),
        Reply(text="I may not delete dashboards for you."),
    )

    events = await run_agent(provider, registry, user=User())

    assert [tool["function"]["name"] for tool in fake_llm.requests[0].tools] == ["transcribe_video"]
    assert kinds(events) == ["assistant_message", "tool_error", "token", "assistant_message", "run_finished"]
    [error] = of(events, ToolError)
    assert error.outcome == "denied"
    assert "permission denied" in error.error
    assert calls == []
    [tool] = tool_messages(fake_llm.requests[1])
    assert tool["tool_call_id"] == "call_x"
    assert tool["content"].startswith("Error: permission denied")
    assert events[-1].status == "completed"


async def test_a_permitted_tool_is_offered_and_runs(provider, registry, fake_llm, calls):
    @registry.tool(permission="dashboards.delete")
    def delete_dashboard(args: DeployArgs, ctx: ToolContext) -> str:
        """Delete a dashboard."""
        calls.append(("delete_dashboard", args.dashboard_id))
        return "deleted"

    fake_llm.script(Reply(tool_calls=[("delete_dashboard", {"dashboard_id": 7})]), Reply(text="Deleted."))

    events = await run_agent(provider, registry, user=User("dashboards.delete"))

    assert [tool["function"]["name"] for tool in fake_llm.requests[0].tools] == ["delete_dashboard"]
    assert [end.output for end in of(events, ToolEnd)] == ["deleted"]
    assert calls == [("delete_dashboard", 7)]


# --- unusable answers and provider failures ----------------------------------------------------------


async def test_an_unknown_tool_is_asked_for_again_once(provider, registry, transcribe, calls, fake_llm):
    fake_llm.script(Reply(tool_calls=[("launch_rockets", {})]), Reply(text="Sorry, I cannot do that."))

    events = await run_agent(provider, registry)

    assert kinds(events) == ["notice", "token", "assistant_message", "run_finished"]
    [notice] = of(events, Notice)
    assert isinstance(notice, RoundRetry)
    assert notice.code == "PROVIDER_RETRY"
    assert "launch_rockets" in notice.detail
    assert calls == []
    assert len(fake_llm.requests) == 2
    assert fake_llm.requests[1].messages == fake_llm.requests[0].messages
    assert events[-1].status == "completed"


async def test_invalid_tool_arguments_twice_fail_the_run(provider, registry, transcribe, calls, fake_llm):
    broken = Reply(tool_calls=[("transcribe_video", '{"assetId": "vid')])
    fake_llm.script(broken, broken, Reply(text="never asked for"))

    events = await run_agent(provider, registry)

    assert kinds(events) == ["notice", "run_finished"]
    assert events[0].code == "PROVIDER_RETRY"
    finished = events[-1]
    assert finished.status == "failed"
    assert "transcribe_video" in finished.error
    assert calls == []
    assert len(fake_llm.requests) == 2


async def test_refused_credentials_fail_the_run_without_retry(provider, registry, transcribe, fake_llm):
    fake_llm.script(Reply(status=401), Reply(text="never asked for"))

    events = await run_agent(provider, registry)

    assert kinds(events) == ["run_finished"]
    assert events[0].status == "failed"
    assert events[0].error == "The model provider refused the credentials (HTTP 401)."
    assert KEY not in json.dumps(events[0].frame())
    assert len(fake_llm.requests) == 1


async def test_an_overloaded_provider_is_asked_once_more(provider, registry, transcribe, fake_llm):
    fake_llm.script(Reply(status=503), Reply(text="Back again."))

    events = await run_agent(provider, registry)

    assert kinds(events) == ["notice", "token", "assistant_message", "run_finished"]
    assert "HTTP 503" in events[0].detail
    assert events[-1].status == "completed"


async def test_a_stream_cut_after_text_fails_and_keeps_the_text(provider, registry, transcribe, fake_llm):
    fake_llm.script(Reply(text="Revenue grew by twelve percent.", cut_after=4), Reply(text="never asked for"))

    events = await run_agent(provider, registry)

    assert kinds(events) == ["token", "run_finished"]
    assert "".join(token.delta for token in of(events, Token)) == "Revenue g"
    assert events[-1].status == "failed"
    assert len(fake_llm.requests) == 1


# --- how tools run -----------------------------------------------------------------------------------


async def test_a_slow_tool_times_out_and_the_loop_goes_on(provider, registry, fake_llm):
    @registry.tool(timeout=0.2)
    async def slow_report(args: TranscribeArgs, ctx: ToolContext) -> str:
        """Build a report, too slowly."""
        await asyncio.sleep(120)
        return "never"

    fake_llm.script(Reply(tool_calls=[("slow_report", {}, "call_s")]), Reply(text="The report took too long."))
    started = time.monotonic()

    events = await run_agent(provider, registry)

    assert time.monotonic() - started < 60  # the tool's own 120 s were cut short
    [error] = of(events, ToolError)
    assert error.outcome == "error"
    assert error.tool_call_id == "call_s"
    assert "slow_report" in error.error
    [tool] = tool_messages(fake_llm.requests[1])
    assert tool["content"].startswith("Error: ")
    assert events[-1].status == "completed"


async def test_a_sync_tool_runs_in_a_worker_thread(provider, registry, fake_llm):
    threads = []

    @registry.tool
    def blocking_lookup(args: AssetArgs, ctx: ToolContext) -> dict:
        """Look an asset up with a blocking client."""
        threads.append(threading.get_ident())
        time.sleep(0.01)
        return {"assetId": args.assetId, "found": True}

    fake_llm.script(Reply(tool_calls=[("blocking_lookup", {"assetId": "a"})]), Reply(text="Found it."))

    events = await run_agent(provider, registry)

    assert [end.output for end in of(events, ToolEnd)] == [{"assetId": "a", "found": True}]
    assert threads and threads[0] != threading.get_ident()
    assert events[-1].status == "completed"


async def test_a_call_without_a_stored_result_reaches_the_provider_with_one(provider, registry, transcribe, fake_llm):
    """Providers refuse a history whose tool call has no result (the fake one does too): the model is told instead."""
    fake_llm.script(Reply(text="Shall I try again?"))
    history = [
        {"role": "user", "content": "Transcribe vid-1"},
        {"role": "assistant", "content": "", "tool_calls": [{"id": "lost", "name": "transcribe_video", "args": {}}]},
        {"role": "user", "content": "Well?"},
    ]

    events = [event async for event in start(provider, registry).events(history)]

    assert events[-1].status == "completed", events
    [request] = fake_llm.requests
    assert [(m["role"], m.get("tool_call_id")) for m in request.messages[1:]] == [
        ("user", None),
        ("assistant", None),
        ("tool", "lost"),
        ("user", None),
    ]
    assert tool_messages(request)[0]["content"] == "Error: no result was recorded."
