"""The one interface every model provider speaks, in provider-agnostic shapes."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any, Literal, NotRequired, Protocol, TypedDict

from tools.registry import ToolSchema


class ToolCall(TypedDict):
    id: str
    name: str
    args: dict[str, Any]


class ImagePart(TypedDict):
    media_type: str  # image/png or image/jpeg
    data: str  # base64


class ChatMessage(TypedDict):
    """One message of history. `tool_calls` only on assistant messages, `tool_call_id`/`name`/`outcome` only on
    tool ones (`outcome`: how the call ended, "done", "rejected", "error"…, as calls.Outcome says).

    `images` only on user messages, and only for vision-capable models (LLM_VISION); providers that cannot
    show images leave them out.
    """

    role: Literal["system", "user", "assistant", "tool"]
    content: str
    tool_calls: NotRequired[list[ToolCall]]
    tool_call_id: NotRequired[str]
    name: NotRequired[str]
    outcome: NotRequired[str]
    images: NotRequired[list[ImagePart]]


class Usage(TypedDict):
    """The tokens one answer cost, as its provider counted them."""

    prompt_tokens: int
    completion_tokens: int


@dataclass(frozen=True)
class ProviderChatParams:
    messages: list[ChatMessage]
    system_prompt: str = ""
    tools: list[ToolSchema] = field(default_factory=list)
    max_tokens: int | None = None
    # The tools the user may not use: never offered, only known, so that a request for one is told so (the local
    # provider; a full model is not told of them).
    withheld: list[ToolSchema] = field(default_factory=list)


@dataclass(frozen=True)
class ProviderChatResponse:
    content: str
    tool_calls: list[ToolCall] = field(default_factory=list)
    finish_reason: str = "stop"
    usage: Usage | None = None  # None when the provider did not say


@dataclass(frozen=True)
class TextDelta:
    text: str


StreamItem = TextDelta | ProviderChatResponse


class ProviderError(Exception):
    """Anything that went wrong talking to a provider, in words safe to show (never a key or a raw body).

    `retryable` marks failures that asking again may cure: an answer that could not be used, an
    overloaded or briefly unreachable server. Timeouts and refused credentials are not.
    """

    def __init__(self, message: str, *, retryable: bool = False):
        super().__init__(message)
        self.message = message
        self.retryable = retryable


class ProviderNotConfigured(ProviderError):
    """The settings name no usable provider (unknown LLM_PROVIDER, missing LLM_API_KEY or LLM_MODEL)."""


class Provider(Protocol):
    name: str

    async def chat(self, params: ProviderChatParams) -> ProviderChatResponse:
        """One whole answer."""

    def stream(self, params: ProviderChatParams) -> AsyncIterator[StreamItem]:
        """Text deltas as they come, then exactly one ProviderChatResponse with the whole answer and its tool calls."""
