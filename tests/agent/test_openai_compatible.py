"""OpenAICompatibleProvider against a real local server (tests/fake_provider.py), read as the `openai` SDK reads it."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
import time
from contextlib import asynccontextmanager

import openai
import pytest

from agentchat.agent.providers import (
    ProviderChatParams,
    ProviderChatResponse,
    ProviderConfig,
    ProviderError,
    ProviderNotConfigured,
    TextDelta,
    get_provider,
    openai_compatible,
)
from agentchat.agent.providers.openai_compatible import OpenAICompatibleProvider
from tests.fake_provider import ARGUMENT_PIECE, Reply

KEY = "sk-test-SECRET-123"

SEARCH_TOOL = {
    "name": "search_dashboards",
    "description": "Search dashboards by text.",
    "parameters": {
        "type": "object",
        "properties": {"query": {"type": "string"}, "limit": {"type": "integer", "default": 10}},
        "required": ["query"],
    },
}


@asynccontextmanager
async def open_provider(config: ProviderConfig):
    provider = get_provider(config)
    try:
        yield provider
    finally:
        await provider.close()


@pytest.fixture
async def provider(openai_config):
    async with open_provider(openai_config) as provider:
        yield provider


@pytest.fixture
def logs(caplog):
    caplog.set_level(logging.DEBUG)
    return caplog


def ask(text: str = "Hi", **params) -> ProviderChatParams:
    return ProviderChatParams(messages=[{"role": "user", "content": text}], **params)


async def collect(stream) -> list:
    return [item async for item in stream]


async def answer(provider, params: ProviderChatParams, mode: str) -> ProviderChatResponse:
    """The whole answer, streamed or not."""
    if mode == "chat":
        return await provider.chat(params)
    items = await collect(provider.stream(params))
    return items[-1]


def assert_key_kept_secret(logs, error: Exception) -> None:
    assert logs.records, "the failure should have been logged at all"
    assert KEY not in logs.text
    for record in logs.records:
        assert KEY not in record.getMessage()
    assert KEY not in str(error)
    assert KEY not in repr(error)


# --- streaming ---------------------------------------------------------------------------------------


USAGE = {"prompt_tokens": 12, "completion_tokens": 7}  # what the fake provider reports when asked


async def test_stream_yields_text_in_order_then_one_whole_answer(provider, fake_llm):
    text = "The quick brown fox jumps over the lazy dog."
    fake_llm.script(Reply(text=text, chunk_chars=3))

    items = await collect(provider.stream(ask()))

    deltas, final = items[:-1], items[-1]
    assert all(isinstance(item, TextDelta) for item in deltas)
    assert [delta.text for delta in deltas] == [text[i : i + 3] for i in range(0, len(text), 3)]
    assert final == ProviderChatResponse(content=text, tool_calls=[], finish_reason="stop", usage=USAGE)
    assert fake_llm.requests[0].body["stream"] is True
    assert fake_llm.requests[0].body["stream_options"] == {"include_usage": True}
    assert fake_llm.requests[0].body["model"] == "fake-model"
    assert "tools" not in fake_llm.requests[0].body


async def test_stream_assembles_a_tool_call_sent_in_many_pieces(provider, fake_llm):
    args = {"query": "quarterly sales by region", "tags": ["finance", "q4"], "limit": 5}
    assert len(json.dumps(args)) > 10 * ARGUMENT_PIECE  # so the call really arrives in many deltas
    fake_llm.script(Reply(tool_calls=[("search_dashboards", args, "call_abc")]))

    items = await collect(provider.stream(ask(tools=[SEARCH_TOOL])))

    call = {"id": "call_abc", "name": "search_dashboards", "args": args}
    assert items == [ProviderChatResponse(content="", tool_calls=[call], finish_reason="tool_calls", usage=USAGE)]


async def test_stream_two_tool_calls_in_one_round_with_text_before(provider, fake_llm):
    fake_llm.script(
        Reply(
            text="Let me check both.",
            tool_calls=[("search_dashboards", {"query": "sales"}), ("dashboard_health", {"dashboard_id": 42})],
        )
    )

    items = await collect(provider.stream(ask()))

    assert "".join(item.text for item in items[:-1]) == "Let me check both."
    final = items[-1]
    assert final.content == "Let me check both."
    assert final.finish_reason == "tool_calls"
    assert [(call["name"], call["args"]) for call in final.tool_calls] == [
        ("search_dashboards", {"query": "sales"}),
        ("dashboard_health", {"dashboard_id": 42}),
    ]
    first, second = final.tool_calls
    assert first["id"] and second["id"] and first["id"] != second["id"]


ANSWERS = {
    "text": Reply(text="Revenue grew by twelve percent this quarter."),
    "tool calls after text": Reply(
        text="Let me check both.",
        tool_calls=[
            ("search_dashboards", {"query": "sales", "limit": 5}, "call_1"),
            ("dashboard_health", {}, "call_2"),
        ],
    ),
    "without usage": Reply(text="No counts here.", usage=None),
}


async def sdk_answer(base_url: str, mode: str) -> ProviderChatResponse:
    """The answer as the `openai` SDK reads it, typed, in the provider's terms."""
    async with openai.AsyncOpenAI(api_key=KEY, base_url=base_url, max_retries=0) as client:
        request = {"model": "fake-model", "messages": [{"role": "user", "content": "Hi"}]}
        if mode == "chat":
            completion = await client.chat.completions.create(**request)
            choice = completion.choices[0]
            content, finish_reason = choice.message.content or "", choice.finish_reason
            calls = [(call.id, call.function.name, call.function.arguments) for call in choice.message.tool_calls or []]
            usage = completion.usage
        else:
            text, pieces, finish_reason, usage = [], {}, None, None
            stream = await client.chat.completions.create(
                **request, stream=True, stream_options={"include_usage": True}
            )
            async for chunk in stream:
                usage = chunk.usage or usage
                for choice in chunk.choices:
                    text.append(choice.delta.content or "")
                    for call in choice.delta.tool_calls or []:
                        piece = pieces.setdefault(call.index, ["", "", ""])
                        piece[0] = call.id or piece[0]
                        piece[1] += call.function.name or ""
                        piece[2] += call.function.arguments or ""
                    finish_reason = choice.finish_reason or finish_reason
            content, calls = "".join(text), [tuple(piece) for _, piece in sorted(pieces.items())]
    return ProviderChatResponse(
        content=content,
        tool_calls=[{"id": id_, "name": name, "args": json.loads(arguments)} for id_, name, arguments in calls],
        finish_reason=finish_reason,
        usage=usage and {"prompt_tokens": usage.prompt_tokens, "completion_tokens": usage.completion_tokens},
    )


@pytest.mark.parametrize("mode", ["stream", "chat"])
@pytest.mark.parametrize("reply", ANSWERS.values(), ids=ANSWERS.keys())
async def test_an_answer_reads_as_the_openai_sdk_reads_it(provider, fake_llm, mode, reply):
    fake_llm.script(reply, reply)

    ours = await answer(provider, ask(), mode)

    assert ours == await sdk_answer(fake_llm.base_url, mode)
    assert ours.content == reply.text
    assert [call["name"] for call in ours.tool_calls] == [name for name, *_ in reply.tool_calls]


async def test_a_stream_framed_otherwise_reads_the_same(provider, fake_llm):
    # CRLF line ends, a comment before each event, `data:` without its space, and each chunk's JSON over two lines.
    reply = ANSWERS["tool calls after text"]
    fake_llm.script(reply, dataclasses.replace(reply, framing="crlf"))

    plain, framed = [await collect(provider.stream(ask())) for _ in range(2)]

    assert framed == plain
    assert framed[-1].content == "Let me check both." and len(framed[-1].tool_calls) == 2


async def test_a_stream_line_over_the_limit_ends_the_answer_unread(provider, fake_llm, logs, monkeypatch):
    monkeypatch.setattr(openai_compatible, "MAX_LINE_BYTES", 100)
    fake_llm.script(Reply(text="Revenue grew."))

    with pytest.raises(ProviderError) as info:
        await collect(provider.stream(ask()))

    assert info.value.retryable and "could not be read" in info.value.message
    assert_key_kept_secret(logs, info.value)


# --- one whole answer --------------------------------------------------------------------------------


async def test_connections_are_kept_for_the_next_answers_however_many_ran_at_once(provider, fake_llm):
    at_once = 120  # more than the SDK's own pool keeps
    # Each answer waits a little before it starts, so that all of a round are open together.
    fake_llm.script(*[Reply(text="ok", stall=0.3, stall_after=0)] * (2 * at_once))
    for _ in range(2):
        answers = await asyncio.gather(*(collect(provider.stream(ask())) for _ in range(at_once)))
        assert all(items[-1].content == "ok" for items in answers)

    assert fake_llm.connections_opened == at_once


async def test_chat_returns_the_whole_text(provider, fake_llm):
    fake_llm.script(Reply(text="Hello there!"))

    response = await provider.chat(ask())

    assert response == ProviderChatResponse(content="Hello there!", tool_calls=[], finish_reason="stop", usage=USAGE)
    assert fake_llm.requests[0].body["stream"] is False
    assert "stream_options" not in fake_llm.requests[0].body


async def test_a_stream_without_usage_says_none(provider, fake_llm):
    fake_llm.script(Reply(text="No counts here.", usage=None))

    *_, final = await collect(provider.stream(ask()))

    assert final.content == "No counts here." and final.usage is None


async def test_usage_is_read_from_the_last_chunk_of_its_own(provider, fake_llm):
    fake_llm.script(Reply(text="Counted.", usage=(1234, 56)))

    *_, final = await collect(provider.stream(ask()))

    assert final.usage == {"prompt_tokens": 1234, "completion_tokens": 56}


async def test_chat_returns_tool_calls_with_parsed_arguments(provider, fake_llm):
    fake_llm.script(
        Reply(tool_calls=[("search_dashboards", {"query": "sales"}, "call_1"), ("dashboard_health", {}, "call_2")])
    )

    response = await provider.chat(ask(tools=[SEARCH_TOOL]))

    assert response.content == ""
    assert response.finish_reason == "tool_calls"
    assert response.tool_calls == [
        {"id": "call_1", "name": "search_dashboards", "args": {"query": "sales"}},
        {"id": "call_2", "name": "dashboard_health", "args": {}},
    ]


# --- what goes on the wire ---------------------------------------------------------------------------


@pytest.mark.parametrize("mode", ["stream", "chat"])
async def test_request_wire_format(provider, fake_llm, mode):
    params = ProviderChatParams(
        system_prompt="You are the dashboards assistant.",
        tools=[SEARCH_TOOL],
        messages=[
            {"role": "user", "content": "Find the sales dashboards"},
            {
                "role": "assistant",
                "content": "",
                "tool_calls": [{"id": "call_1", "name": "search_dashboards", "args": {"query": "sales"}}],
            },
            {"role": "tool", "tool_call_id": "call_1", "name": "search_dashboards", "content": '{"hits": 2}'},
            {"role": "assistant", "content": "Found two."},
            {"role": "user", "content": "Thanks"},
        ],
    )

    await answer(provider, params, mode)

    request = fake_llm.requests[0]
    assert request.path == "/v1/chat/completions"
    assert request.headers["authorization"] == f"Bearer {KEY}"
    system, user, call, result, reply, last = request.messages
    assert system == {"role": "system", "content": "You are the dashboards assistant."}
    assert user == {"role": "user", "content": "Find the sales dashboards"}
    assert call["role"] == "assistant"
    assert call["content"] is None
    [wire_call] = call["tool_calls"]
    assert wire_call["id"] == "call_1"
    assert wire_call["type"] == "function"
    assert wire_call["function"]["name"] == "search_dashboards"
    assert isinstance(wire_call["function"]["arguments"], str)
    assert json.loads(wire_call["function"]["arguments"]) == {"query": "sales"}
    assert result == {"role": "tool", "tool_call_id": "call_1", "content": '{"hits": 2}'}
    assert reply == {"role": "assistant", "content": "Found two."}
    assert last == {"role": "user", "content": "Thanks"}
    assert request.tools == [
        {
            "type": "function",
            "function": {
                "name": "search_dashboards",
                "description": "Search dashboards by text.",
                "parameters": SEARCH_TOOL["parameters"],
            },
        }
    ]


async def test_no_system_message_without_a_system_prompt(provider, fake_llm):
    await provider.chat(ask("Hello"))

    assert fake_llm.requests[0].messages == [{"role": "user", "content": "Hello"}]


# --- failures ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("mode", ["stream", "chat"])
@pytest.mark.parametrize(
    ("status", "retryable"), [(400, False), (401, False), (403, False), (429, True), (500, True), (503, True)]
)
async def test_http_errors(provider, fake_llm, logs, mode, status, retryable):
    fake_llm.script(Reply(status=status))

    with pytest.raises(ProviderError) as info:
        await answer(provider, ask(), mode)

    assert info.value.retryable is retryable
    assert f"HTTP {status}" in info.value.message
    assert_key_kept_secret(logs, info.value)


async def test_refused_key_is_not_quoted_back(provider, fake_llm, logs):
    fake_llm.script(Reply(status=401))

    with pytest.raises(ProviderError) as info:
        await collect(provider.stream(ask()))

    assert info.value.message == "The model provider refused the credentials (HTTP 401)."
    assert not info.value.retryable
    assert_key_kept_secret(logs, info.value)


@pytest.mark.parametrize("mode", ["stream", "chat"])
async def test_a_stalled_provider_times_out(openai_config, fake_llm, logs, mode):
    fake_llm.script(Reply(text="too late", stall=60))
    started = time.monotonic()

    async with open_provider(dataclasses.replace(openai_config, timeout=0.5)) as provider:
        with pytest.raises(ProviderError) as info:
            await answer(provider, ask(), mode)

    assert time.monotonic() - started < 30  # the provider's 60 s stall was cut short
    assert "did not answer in time" in info.value.message
    assert not info.value.retryable
    assert_key_kept_secret(logs, info.value)


async def test_stream_cut_after_some_text_is_not_retried(provider, fake_llm, logs):
    # Chunks: the role, then 3 characters each; cut after the role and three of them.
    fake_llm.script(Reply(text="Revenue grew by twelve percent this quarter.", cut_after=4))
    seen = []

    with pytest.raises(ProviderError) as info:
        async for item in provider.stream(ask()):
            seen.append(item)

    assert [item.text for item in seen] == ["Rev", "enu", "e g"]
    assert not info.value.retryable
    assert_key_kept_secret(logs, info.value)


async def test_malformed_chunk_before_any_text_may_be_retried(provider, fake_llm, logs):
    fake_llm.script(Reply(text="Revenue grew.", malformed_after=1))

    with pytest.raises(ProviderError) as info:
        await collect(provider.stream(ask()))

    assert info.value.retryable and "could not be read" in info.value.message
    assert_key_kept_secret(logs, info.value)


async def test_malformed_chunk_after_text_ends_the_answer(provider, fake_llm, logs):
    fake_llm.script(Reply(text="Revenue grew by twelve percent.", malformed_after=3))
    seen = []

    with pytest.raises(ProviderError) as info:
        async for item in provider.stream(ask()):
            seen.append(item)

    assert [item.text for item in seen] == ["Rev", "enu"]
    assert not info.value.retryable and "stopped halfway" in info.value.message


@pytest.mark.parametrize(
    "chunk",
    [
        '{"choices": "none"}',
        '{"choices": [{"delta": {"content": 42}}]}',
        '{"choices": [{"delta": {"tool_calls": [{"index": 0, "function": {"name": 7}}]}}]}',
        '["not", "an", "object"]',
    ],
)
async def test_a_chunk_of_the_wrong_shape_ends_the_answer_as_a_provider_error(provider, fake_llm, logs, chunk):
    fake_llm.script(Reply(text="Revenue grew by twelve percent.", malformed_after=3, malformed_chunk=chunk))
    seen = []

    with pytest.raises(ProviderError) as info:
        async for item in provider.stream(ask()):
            seen.append(item)

    assert [item.text for item in seen] == ["Rev", "enu"]
    assert not info.value.retryable and "stopped halfway" in info.value.message


async def test_a_whole_answer_that_is_not_json_is_a_provider_error(provider, fake_llm, logs):
    fake_llm.script(Reply(text="ignored", malformed_after=0))

    with pytest.raises(ProviderError) as info:
        await provider.chat(ask())

    assert info.value.retryable and "could not be read" in info.value.message


async def test_stream_cut_before_any_text_may_be_retried(provider, fake_llm, logs):
    fake_llm.script(Reply(text="Revenue grew.", cut_after=1))
    seen = []

    with pytest.raises(ProviderError) as info:
        async for item in provider.stream(ask()):
            seen.append(item)

    assert seen == []
    assert info.value.retryable
    assert_key_kept_secret(logs, info.value)


async def test_connection_refused_may_be_retried(openai_config, logs):
    async with open_provider(dataclasses.replace(openai_config, base_url="http://127.0.0.1:9/v1")) as provider:
        with pytest.raises(ProviderError) as info:
            await collect(provider.stream(ask()))

    assert info.value.message == "The model provider could not be reached."
    assert info.value.retryable
    assert_key_kept_secret(logs, info.value)


@pytest.mark.parametrize("mode", ["stream", "chat"])
@pytest.mark.parametrize("arguments", ['{"query": "sal', '["not", "an", "object"]'])
async def test_unusable_tool_arguments_name_the_tool_and_may_be_retried(provider, fake_llm, mode, arguments):
    fake_llm.script(Reply(tool_calls=[("search_dashboards", arguments)]))

    with pytest.raises(ProviderError) as info:
        await answer(provider, ask(), mode)

    assert "search_dashboards" in info.value.message
    assert info.value.retryable


# --- configuration -----------------------------------------------------------------------------------


def test_config_repr_hides_the_key(openai_config):
    assert KEY not in repr(openai_config)
    assert KEY not in str(openai_config)


def test_missing_api_key_is_not_configured():
    with pytest.raises(ProviderNotConfigured) as info:
        get_provider(ProviderConfig(provider="openai-compatible", api_key="", model="m"))

    assert str(info.value) == "LLM provider is not configured: LLM_API_KEY is missing"


def test_missing_model_is_not_configured():
    with pytest.raises(ProviderNotConfigured) as info:
        get_provider(ProviderConfig(provider="openai-compatible", api_key=KEY, model=""))

    assert str(info.value) == "LLM provider is not configured: LLM_MODEL is missing"


def test_unknown_provider_is_named():
    with pytest.raises(ProviderNotConfigured) as info:
        get_provider(ProviderConfig(provider="carrier-pigeon", api_key=KEY, model="m"))

    assert "carrier-pigeon" in str(info.value)


async def test_openai_compatible_is_chosen_by_name(openai_config):
    async with open_provider(openai_config) as provider:
        assert isinstance(provider, OpenAICompatibleProvider)
