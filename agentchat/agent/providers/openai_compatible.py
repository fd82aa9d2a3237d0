"""Any endpoint that speaks OpenAI chat completions (OpenAI, vLLM, Ollama, llama.cpp server, LiteLLM…), over aiohttp.

The wire format is JSON over HTTP, and a stream's chunks are server-sent events; every run's request and every chunk
of every stream of the process pass through the one event loop. Sent through the `openai` SDK, whose request is built
through its options, httpx's request and headers, and its aiohttp transport, a request costs that loop about three
times the processor time it costs sent by aiohttp itself (docs/decisions.md).
"""

from __future__ import annotations

import functools
import json
import logging
import ssl
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import aiohttp
import httpx2
from aiohttp.http_exceptions import LineTooLong

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

DEFAULT_BASE_URL = "https://api.openai.com/v1"
RETRYABLE_STATUSES = {408, 409, 429, 500, 502, 503, 504}
# Connections to the provider are kept while idle, as many as ran at once and for a minute: a new one costs a TCP
# and a TLS handshake, round trips before the request even leaves. One the provider closed meanwhile is seen as
# closed and not used again.
MAX_CONNECTIONS = 1000
KEEP_IDLE_SECONDS = 60
# A line of a stream longer than this ends the answer: a provider cannot make the process hold an endless line.
MAX_LINE_BYTES = 16 * 1024 * 1024


@functools.cache
def _tls() -> ssl.SSLContext:
    """The TLS settings of every provider connection (certifi's authorities, as the `openai` SDK has them), made once
    for the process: loading the authorities takes tens of milliseconds, and a provider is made for each event loop
    that uses one."""
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
# What a malformed body or chunk raises as it is read.
MALFORMED = (ValueError, AttributeError, TypeError, KeyError, IndexError, LineTooLong)


def _usage(reported: Any) -> Usage | None:
    """The two counts of a usage object; None when it is missing or not made of counts."""
    if not isinstance(reported, dict):
        return None
    counts = reported.get("prompt_tokens"), reported.get("completion_tokens")
    if not all(isinstance(count, int) and not isinstance(count, bool) and count >= 0 for count in counts):
        return None
    return {"prompt_tokens": counts[0], "completion_tokens": counts[1]}


def _status_error(status: int) -> ProviderError:
    """An answer other than 200, in words safe to show: the status, never the body (it may quote the key back)."""
    if status in (401, 403):
        return ProviderError(f"The model provider refused the credentials (HTTP {status}).")
    return ProviderError(f"The model provider answered HTTP {status}.", retryable=status in RETRYABLE_STATUSES)


def _provider_error(exc: Exception, *, text_seen: bool) -> ProviderError:
    """What a failure to talk to the provider or to read it means. Once the person has seen text, nothing is retried:
    the run ends with that text kept (docs/architecture.md)."""
    if text_seen:
        return ProviderError(HALFWAY)
    if isinstance(exc, TimeoutError):  # aiohttp's timeouts are connection errors too
        return ProviderError("The model provider did not answer in time.")
    if isinstance(exc, aiohttp.ClientConnectionError):
        return ProviderError("The model provider could not be reached.", retryable=True)
    if isinstance(exc, aiohttp.ClientPayloadError):  # the body cut off, as when the connection is dropped
        return ProviderError(HALFWAY, retryable=True)
    return ProviderError(UNREADABLE, retryable=True)


async def _events(body: aiohttp.StreamReader) -> AsyncIterator[bytes]:
    """The data of each server-sent event of a stream (its `data:` lines), until `[DONE]`; comments and other fields
    are skipped, and an event the stream ends before finishing is dropped, as the format has it. What follows `[DONE]`
    is read to the end and dropped: a connection is kept for the next request only once its answer is read whole."""
    data: list[bytes] = []
    while line := await body.readuntil(b"\n", max_size=MAX_LINE_BYTES):
        line = line.rstrip(b"\r\n")
        if line.startswith(b"data:"):
            data.append(line.removeprefix(b"data:").removeprefix(b" "))
        elif not line and data:
            event, data = b"\n".join(data), []
            if event == b"[DONE]":
                while await body.readany():
                    pass
                return
            yield event


def _text(value: Any) -> str:
    if value is not None and not isinstance(value, str):
        raise TypeError("the model provider sent text that is not a string")
    return value or ""


class OpenAICompatibleProvider:
    name = "openai-compatible"

    def __init__(self, config):
        if not config.api_key:
            raise ProviderNotConfigured("LLM provider is not configured: LLM_API_KEY is missing")
        if not config.model:
            raise ProviderNotConfigured("LLM provider is not configured: LLM_MODEL is missing")
        self.model = config.model
        self.url = f"{(config.base_url or DEFAULT_BASE_URL).rstrip('/')}/chat/completions"
        self._key = config.api_key
        # As long to connect, and as long for each read: a stream may go on for minutes while its chunks keep coming.
        self._timeout = aiohttp.ClientTimeout(total=None, connect=config.timeout, sock_read=config.timeout)
        self._session: aiohttp.ClientSession | None = None

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
    async def _post(self, params: ProviderChatParams, *, stream: bool) -> AsyncIterator[aiohttp.ClientResponse]:
        """The provider's answer to the request, once its status is known to be 200."""
        if self._session is None:  # made on the event loop that uses it (see providers.get_provider)
            self._session = aiohttp.ClientSession(
                connector=aiohttp.TCPConnector(limit=MAX_CONNECTIONS, keepalive_timeout=KEEP_IDLE_SECONDS, ssl=_tls()),
                headers={"Authorization": f"Bearer {self._key}"},
                timeout=self._timeout,
            )
        body = self._request(params, stream=stream)
        async with self._session.post(self.url, json=body, allow_redirects=False) as got:
            if got.status != 200:
                raise _status_error(got.status)
            yield got

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()

    @asynccontextmanager
    async def _errors(self, text: list[str]):
        try:
            yield
        except ProviderError as error:
            logger.warning("provider call failed: %s", error.message)
            raise
        except (aiohttp.ClientError, TimeoutError, *MALFORMED) as exc:
            error = _provider_error(exc, text_seen=bool(text))
            logger.warning("provider call failed: %s (%s)", error.message, type(exc).__name__)
            raise error from None

    async def chat(self, params: ProviderChatParams) -> ProviderChatResponse:
        async with self._errors([]):
            async with self._post(params, stream=False) as response:
                completion = json.loads(await response.read())
            if not completion.get("choices"):
                raise ProviderError("The model provider sent an answer with no choices.", retryable=True)
            choice = completion["choices"][0]
            message = choice.get("message") or {}
            content, finish_reason = _text(message.get("content")), _text(choice.get("finish_reason")) or "stop"
            usage = _usage(completion.get("usage"))
            raw_calls = [
                (_text(call.get("id")), _text(call["function"].get("name")), _text(call["function"].get("arguments")))
                for call in message.get("tool_calls") or []
                if call.get("type", "function") == "function"
            ]
        calls = [ToolCall(id=id_, name=name, args=parse_arguments(name, raw)) for id_, name, raw in raw_calls]
        return ProviderChatResponse(content=content, tool_calls=calls, finish_reason=finish_reason, usage=usage)

    async def stream(self, params: ProviderChatParams) -> AsyncIterator[StreamItem]:
        text: list[str] = []
        partial_calls: dict[int, dict[str, str]] = {}
        finish_reason = None
        usage: Usage | None = None
        async with self._errors(text), self._post(params, stream=True) as response:
            async for event in _events(response.content):
                chunk = json.loads(event)
                # Asked for, the usage comes in a last chunk of its own (with no choices), or in the last one.
                usage = _usage(chunk.get("usage")) or usage
                if not chunk.get("choices"):
                    continue
                choice = chunk["choices"][0]
                delta = choice.get("delta") or {}
                if content := _text(delta.get("content")):
                    text.append(content)
                    yield TextDelta(content)
                for call in delta.get("tool_calls") or []:
                    partial = partial_calls.setdefault(call.get("index", 0), {"id": "", "name": "", "arguments": ""})
                    partial["id"] = _text(call.get("id")) or partial["id"]
                    function = call.get("function") or {}
                    partial["name"] += _text(function.get("name"))
                    partial["arguments"] += _text(function.get("arguments"))
                finish_reason = _text(choice.get("finish_reason")) or finish_reason
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
