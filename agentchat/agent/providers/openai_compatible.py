"""Any endpoint that speaks OpenAI chat completions (OpenAI, vLLM, Ollama, llama.cpp server, LiteLLM…)."""

from __future__ import annotations

import functools
import json
import logging
import ssl
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx2
import openai

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
    Usage,
)

logger = logging.getLogger(__name__)

RETRYABLE_STATUSES = {408, 409, 429, 500, 502, 503, 504}
# Connections to the provider are kept while idle, as many as ran at once and for a minute: a new one costs a TCP
# and a TLS handshake, round trips before the request even leaves (the SDK's own pool keeps 100 for 5 seconds).
# One the provider closed meanwhile is seen as closed and not used again. They go through the SDK's aiohttp
# transport: reading a streamed chunk costs it less than half of what its default httpx transport does, and
# every chunk of every stream of the process is read on the one event loop (docs/benchmarks.md).
CONNECTIONS = httpx2.Limits(max_connections=1000, keepalive_expiry=60)


@functools.cache
def _tls() -> ssl.SSLContext:
    """The TLS settings of every provider connection, the SDK's defaults, made once for the process: loading the
    certificate authorities takes tens of milliseconds, and a provider is made for each event loop that uses one."""
    return httpx2.create_ssl_context()


def to_wire_messages(system_prompt: str, messages: list[ChatMessage]) -> list[dict[str, Any]]:
    wire: list[dict[str, Any]] = [{"role": "system", "content": system_prompt}] if system_prompt else []
    for message in messages:
        if message["role"] == "tool":
            wire.append({"role": "tool", "tool_call_id": message["tool_call_id"], "content": message["content"]})
        elif message["role"] == "assistant" and message.get("tool_calls"):
            wire.append(
                {
                    "role": "assistant",
                    "content": message["content"] or None,
                    "tool_calls": [
                        {
                            "id": call["id"],
                            "type": "function",
                            "function": {"name": call["name"], "arguments": json.dumps(call["args"])},
                        }
                        for call in message["tool_calls"]
                    ],
                }
            )
        elif message.get("images"):
            parts: list[dict[str, Any]] = [{"type": "text", "text": message["content"]}]
            parts += [
                {"type": "image_url", "image_url": {"url": f"data:{image['media_type']};base64,{image['data']}"}}
                for image in message["images"]
            ]
            wire.append({"role": message["role"], "content": parts})
        else:
            wire.append({"role": message["role"], "content": message["content"]})
    return wire


def to_wire_tools(tools: list[ToolSchema]) -> list[dict[str, Any]]:
    return [
        {
            "type": "function",
            "function": {"name": tool["name"], "description": tool["description"], "parameters": tool["parameters"]},
        }
        for tool in tools
    ]


def parse_arguments(name: str, raw: str | None) -> dict[str, Any]:
    try:
        args = json.loads(raw or "{}")
    except json.JSONDecodeError:
        raise ProviderError(f"The model sent arguments for {name} that are not valid JSON.", retryable=True) from None
    if not isinstance(args, dict):
        raise ProviderError(f"The model sent arguments for {name} that are not a JSON object.", retryable=True)
    return args


HALFWAY = "The model provider's answer stopped halfway."
UNREADABLE = "The model provider sent an answer that could not be read."
# What a malformed body or chunk raises inside the SDK's parsing and our reading of it.
MALFORMED = (ValueError, AttributeError, TypeError, KeyError)


def _usage(reported: Any) -> Usage | None:
    """The two counts of a usage object; None when it is missing or not made of counts."""
    if not isinstance(reported, dict):
        return None
    counts = reported.get("prompt_tokens"), reported.get("completion_tokens")
    if not all(isinstance(count, int) and not isinstance(count, bool) and count >= 0 for count in counts):
        return None
    return {"prompt_tokens": counts[0], "completion_tokens": counts[1]}


def _provider_error(exc: Exception, *, text_seen: bool) -> ProviderError:
    """Words safe to show: the status and kind of failure, never the body (it may quote the key back).

    Once the person has seen text, nothing is retried: the run ends with that text kept (docs/architecture.md).
    """
    error = _classify(exc)
    if text_seen:
        return ProviderError(HALFWAY if isinstance(exc, (openai.APIConnectionError, *MALFORMED)) else error.message)
    return error


def _classify(exc: Exception) -> ProviderError:
    if isinstance(exc, openai.APITimeoutError) and _timed_out(exc):
        return ProviderError("The model provider did not answer in time.")
    if isinstance(exc, openai.APIConnectionError):
        return ProviderError("The model provider could not be reached.", retryable=True)
    if isinstance(exc, openai.AuthenticationError | openai.PermissionDeniedError):
        return ProviderError(f"The model provider refused the credentials (HTTP {exc.status_code}).")
    if isinstance(exc, openai.APIStatusError):
        return ProviderError(
            f"The model provider answered HTTP {exc.status_code}.", retryable=exc.status_code in RETRYABLE_STATUSES
        )
    return ProviderError(UNREADABLE, retryable=True)


def _timed_out(exc: BaseException) -> bool:
    """Whether a timeout is what ended the call. The SDK's aiohttp transport says "timeout" for every connection
    that failed, a refused one too, so the causes decide."""
    cause = exc.__cause__
    while cause is not None and not isinstance(cause, TimeoutError):
        cause = cause.__cause__
    return cause is not None


class OpenAICompatibleProvider:
    name = "openai-compatible"

    def __init__(self, config):
        if not config.api_key:
            raise ProviderNotConfigured("LLM provider is not configured: LLM_API_KEY is missing")
        if not config.model:
            raise ProviderNotConfigured("LLM provider is not configured: LLM_MODEL is missing")
        self.model = config.model
        self.client = openai.AsyncOpenAI(
            api_key=config.api_key,
            base_url=config.base_url or None,
            timeout=config.timeout,
            # Retrying is the orchestrator's decision, made once and told to the user.
            max_retries=0,
            http_client=openai.DefaultAioHttpClient(limits=CONNECTIONS, verify=_tls()),
        )

    def _request(self, params: ProviderChatParams, *, stream: bool) -> dict[str, Any]:
        request: dict[str, Any] = {
            "model": self.model,
            "messages": to_wire_messages(params.system_prompt, params.messages),
            "stream": stream,
        }
        if stream:
            request["stream_options"] = {"include_usage": True}
        if params.tools:
            request["tools"] = to_wire_tools(params.tools)
        if params.max_tokens:
            request["max_tokens"] = params.max_tokens
        return request

    @asynccontextmanager
    async def _errors(self, text: list[str]):
        try:
            yield
        except (openai.OpenAIError, *MALFORMED) as exc:
            error = _provider_error(exc, text_seen=bool(text))
            logger.warning("provider call failed: %s (%s)", error.message, type(exc).__name__)
            raise error from None

    async def chat(self, params: ProviderChatParams) -> ProviderChatResponse:
        async with self._errors([]):
            completion = await self.client.chat.completions.create(**self._request(params, stream=False))
            if not completion.choices:
                raise ProviderError("The model provider sent an answer with no choices.", retryable=True)
            choice = completion.choices[0]
            content, finish_reason = choice.message.content or "", choice.finish_reason or "stop"
            usage = _usage(completion.usage.model_dump() if completion.usage else None)
            raw_calls = [
                (call.id, call.function.name, call.function.arguments)
                for call in choice.message.tool_calls or []
                if call.type == "function"
            ]
        calls = [ToolCall(id=id_, name=name, args=parse_arguments(name, raw)) for id_, name, raw in raw_calls]
        return ProviderChatResponse(content=content, tool_calls=calls, finish_reason=finish_reason, usage=usage)

    async def stream(self, params: ProviderChatParams) -> AsyncIterator[StreamItem]:
        text: list[str] = []
        partial_calls: dict[int, dict[str, str]] = {}
        finish_reason = None
        usage: Usage | None = None
        async with self._errors(text):
            # The SDK's transport, SSE decoding and errors, but each chunk as the plain JSON it is: building a typed
            # object per chunk took a third of a busy process's time (docs/benchmarks.md). A chunk of the wrong
            # shape raises one of MALFORMED, as a typed one would.
            stream = await self.client.post(
                "/chat/completions",
                body=self._request(params, stream=True),
                cast_to=object,
                stream=True,
                stream_cls=openai.AsyncStream[object],
            )
            try:
                async for chunk in stream:
                    # Asked for, the usage comes in a last chunk of its own (with no choices), or in the last one.
                    usage = _usage(chunk.get("usage")) or usage
                    if not chunk.get("choices"):
                        continue
                    choice = chunk["choices"][0]
                    delta = choice.get("delta") or {}
                    if content := delta.get("content"):
                        if not isinstance(content, str):
                            raise TypeError("a chunk's content is not text")
                        text.append(content)
                        yield TextDelta(content)
                    for call in delta.get("tool_calls") or []:
                        partial = partial_calls.setdefault(
                            call.get("index", 0), {"id": "", "name": "", "arguments": ""}
                        )
                        partial["id"] = call.get("id") or partial["id"]
                        function = call.get("function") or {}
                        partial["name"] += function.get("name") or ""
                        partial["arguments"] += function.get("arguments") or ""
                    finish_reason = choice.get("finish_reason") or finish_reason
            finally:
                await stream.close()
        if finish_reason is None:
            raise ProviderError(HALFWAY, retryable=not text)
        calls = []
        for index, partial in sorted(partial_calls.items()):
            if not partial["name"]:
                raise ProviderError("The model sent a tool call without a name.", retryable=True)
            calls.append(
                ToolCall(
                    id=partial["id"] or f"call_{index}",
                    name=partial["name"],
                    args=parse_arguments(partial["name"], partial["arguments"]),
                )
            )
        yield ProviderChatResponse(content="".join(text), tool_calls=calls, finish_reason=finish_reason, usage=usage)
