"""LocalProvider: chat and stream over the in-process model, its failures told as ProviderErrors."""

from __future__ import annotations

import dataclasses
import functools
import logging
import os
import threading
from collections.abc import AsyncIterator
from contextlib import aclosing
from typing import TYPE_CHECKING

from tools.files import ATTACHED, REFERENCED

from ...prompts import build_system_prompt
from ..base import (
    ChatMessage,
    ProviderChatParams,
    ProviderChatResponse,
    ProviderError,
    StreamItem,
    TextDelta,
    ToolSchema,
    Usage,
)
from . import answers, follow_ups
from .chatml import chat_prompt, prompt_tokens, to_chatml_messages
from .llama import TEXT_SAMPLING, evaluate, generate
from .model import (
    CONTEXT_WINDOW,
    Emit,
    Stopped,
    Watch,
    exclusive_use,
    generation_lock,
    load_model,
    require_llama_cpp,
    resolve_model_path,
    run_in_worker,
)
from .routing import QUESTION, Decision, decide, each_listed, language_of

if TYPE_CHECKING:
    from llama_cpp import Llama

    from .. import ProviderConfig

logger = logging.getLogger(__name__)

# Small talk and general questions get a short reply: the longer it writes, the more a 135M model makes up.
SMALL_TALK_TOKENS = 96
DEFAULT_SYSTEM_PROMPT = "You are a helpful assistant."


def newest_turn(messages: list[ChatMessage]) -> list[ChatMessage]:
    """The last user message and what came after it (the whole history when none is the user's); of the message,
    the person's own words, not its files' text, which it has no tool to read and would take seconds to."""
    asked = [index for index, message in enumerate(messages) if message["role"] == "user"]
    if not asked:
        return messages
    request, *after = messages[asked[-1] :]
    if isinstance(request["content"], str):
        request = {**request, "content": request["content"].split(ATTACHED, 1)[0]}
    return [request, *after]


def has_files(messages: list[ChatMessage]) -> bool:
    """Whether the person attached files anywhere in the conversation."""
    return any(
        message["role"] == "user"
        and (ATTACHED in message["content"] or REFERENCED in message["content"] or message.get("images"))
        for message in messages
    )


def llama_error(exc: Exception) -> ProviderError:
    if isinstance(exc, ValueError) and "exceed context window" in str(exc):
        return ProviderError(
            f"The conversation is too long for the local model (its context window is {CONTEXT_WINDOW} tokens)."
        )
    return ProviderError(f"The local model failed while answering ({type(exc).__name__}).")


class LocalProvider:
    name = "local"

    def __init__(self, config: ProviderConfig):
        require_llama_cpp()
        self.model_path = resolve_model_path(config.model)
        # Every core by default: llama-cpp-python's own default, half of them, reads prompts at half the speed on
        # two cores (129 against 245 tokens a second), and the logits are the same bit for bit.
        self.threads = config.threads or os.cpu_count() or 1
        self.timeout = config.timeout

    def warm_up(self) -> threading.Thread:
        """Load the model in the background now, and read the system prompt every conversation starts with into
        llama.cpp's cache, so that the first person to ask waits for neither."""
        thread = threading.Thread(target=self._warm, name="local-llm-load", daemon=True)
        thread.start()
        return thread

    def _warm(self) -> None:
        llm = load_model(self.model_path, self.threads)
        system = [{"role": "system", "content": build_system_prompt()}]
        with generation_lock:
            evaluate(llm, prompt_tokens(llm, chat_prompt(llm, system)), Watch(threading.Event(), self.timeout))

    async def chat(self, params: ProviderChatParams) -> ProviderChatResponse:
        async with aclosing(self.stream(params)) as items:
            async for item in items:
                if isinstance(item, ProviderChatResponse):
                    return item
        raise ProviderError("The local model ended its answer without finishing it.", retryable=True)

    async def stream(self, params: ProviderChatParams) -> AsyncIterator[StreamItem]:
        seen_text = False
        async with aclosing(run_in_worker(functools.partial(self._work, params))) as items:
            async for item in items:
                if isinstance(item, ProviderError):
                    # Once the person has seen text, a failure ends the run with that text kept: no retry.
                    item.retryable = item.retryable and not seen_text
                    raise item
                yield item
                if isinstance(item, ProviderChatResponse):
                    return
                seen_text = True

    def _work(self, params: ProviderChatParams, emit: Emit, stop: threading.Event) -> None:
        watch = Watch(stop, self.timeout)
        try:
            with exclusive_use(watch):
                # Emitted before the lock is released, so concurrent streams never interleave.
                answer = self._answer(params, emit, watch)
                usage: Usage = {"prompt_tokens": watch.prompt_tokens, "completion_tokens": watch.completion_tokens}
                emit(dataclasses.replace(answer, usage=usage))
        except Stopped:
            return
        except ProviderError as error:
            emit(error)
        except Exception as exc:
            logger.warning("local model failed: %s", type(exc).__name__, exc_info=True)
            emit(llama_error(exc))

    def _answer(self, params: ProviderChatParams, emit: Emit, watch: Watch) -> ProviderChatResponse:
        llm = load_model(self.model_path, self.threads)
        # It does not hold a conversation: the newest turn is all it reads. The earlier turns, a tool's whole result
        # among them, would be read again at every request, seconds each on two cores (docs/operations.md).
        turn = newest_turn(params.messages)
        history = to_chatml_messages(turn)
        # Always a system message: without one the template injects "You are ... SmolLM".
        system_prompt = params.system_prompt or DEFAULT_SYSTEM_PROMPT
        last = turn[-1] if turn else None
        if last is not None and last["role"] == "tool":
            # One tool round per request, then words, and the words are the tools' own (answers.py).
            return self._say(answers.after_calls(turn, params.tools), emit)
        request = last["content"] if last is not None and last["role"] == "user" else ""
        if request and (refusal := answers.not_permitted(request, params.tools, params.withheld)):
            return self._say(refusal, emit)
        if request and answers.asks_about_files(request) and has_files(params.messages):
            return self._say(answers.what_it_can_do(request, params.tools, files=True), emit)
        before = params.messages[: len(params.messages) - len(turn)]
        earlier = follow_ups.earlier_calls(before)
        if request and (page := follow_ups.another_page(request, earlier, params.tools)):
            if page.call is None:
                return self._say(answers.no_such_page(request, page.asked, page.pages, listed=page.listed), emit)
            return ProviderChatResponse(content="", tool_calls=[page.call], finish_reason="tool_calls")
        # Picked by its place, an item of no list shown: the model would search for "пятым", or make one up.
        if request and follow_ups.picks_unlisted(request, earlier):
            return self._say(answers.not_in_a_list(request), emit)
        if request and params.tools and not answers.asks_for_help(request):
            request, decision, within = self._decision(
                llm, params.tools, system_prompt, history, before, earlier, watch
            )
            if decision.call is not None:
                call = decision.call if within is None else follow_ups.narrowed(decision.call, earlier, within)
                tool = next(tool for tool in params.tools if tool["name"] == call["name"])
                calls = each_listed(call, request, tool)
                calls = calls if len(calls) > 1 else follow_ups.each_pointed(call, request, earlier)
                return ProviderChatResponse(content="", tool_calls=calls, finish_reason="tool_calls")
            if decision.unsure is not None:
                return self._say(answers.unsure(request, list(decision.unsure)), emit)
            if decision.unsaid is not None:
                return self._say(answers.which_value(request, *decision.unsaid), emit)
            if acting := answers.acting(request, params.tools):
                return self._say(answers.unsure(request, acting[:2]), emit)
        # A question for no tool is one of general knowledge, which a 135M model answers wrongly as often as not
        # ("What's the capital of France?": "L'Alcazaba, la Cité de la France.").
        if request and (language_of(request) == "ru" or answers.asks_about_itself(request) or QUESTION.search(request)):
            return self._say(answers.what_it_can_do(request, params.tools), emit)
        text, finish_reason = generate(
            llm,
            prompt_tokens(llm, chat_prompt(llm, [{"role": "system", "content": system_prompt}, *history])),
            watch,
            max_tokens=min(params.max_tokens or SMALL_TALK_TOKENS, SMALL_TALK_TOKENS),
            sampling=TEXT_SAMPLING,
            on_text=lambda piece: emit(TextDelta(piece)),
        )
        return ProviderChatResponse(content=text, finish_reason=finish_reason)

    @staticmethod
    def _decision(
        llm: Llama,
        tools: list[ToolSchema],
        system_prompt: str,
        history: list[dict[str, str]],
        before: list[ChatMessage],
        earlier: list[follow_ups.Earlier],
        watch: Watch,
    ) -> tuple[str, Decision, ToolSchema | None]:
        """The request decided on, the decision, and the tool whose last results it looks within, if any: the
        request before this one with this one, when this one answers the question it got ("deploy it", "staging");
        else this one."""
        request = history[-1]["content"]
        ids = follow_ups.pointed_at(request, earlier, before)
        about = follow_ups.last_object(earlier)
        if (whole := follow_ups.completed(request, before, tools)) != request:
            decision = decide(
                llm, system_prompt, [*history[:-1], {"role": "user", "content": whole}], tools, watch, ids, about=about
            )
            # Asked the same again, the reply did not answer the question ("thanks"): it is read on its own.
            if decision.unsure is None:
                return whole, decision, None
        within = follow_ups.looked_within(request, earlier, tools)
        return request, decide(llm, system_prompt, history, tools, watch, ids, within, about=about), within

    @staticmethod
    def _say(text: str, emit: Emit) -> ProviderChatResponse:
        """A written answer, streamed line by line like a generated one."""
        for line in text.splitlines(keepends=True):
            emit(TextDelta(line))
        return ProviderChatResponse(content=text, finish_reason="stop")
