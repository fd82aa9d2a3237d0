"""Providers by name, imported on first use so that an unused one costs nothing (and may be missing)."""

from __future__ import annotations

import asyncio
import weakref
from dataclasses import dataclass, field
from importlib import import_module

from .base import (
    ChatMessage,
    ImagePart,
    Provider,
    ProviderChatParams,
    ProviderChatResponse,
    ProviderError,
    ProviderNotConfigured,
    TextDelta,
    ToolCall,
    ToolSchema,
    Usage,
)

__all__ = [
    "PROVIDERS",
    "ChatMessage",
    "ImagePart",
    "Provider",
    "ProviderChatParams",
    "ProviderChatResponse",
    "ProviderConfig",
    "ProviderError",
    "ProviderNotConfigured",
    "TextDelta",
    "ToolCall",
    "ToolSchema",
    "Usage",
    "get_provider",
    "warm_up",
]

PROVIDERS = {
    "openai-compatible": "agentchat.agent.providers.openai_compatible.OpenAICompatibleProvider",
    "local": "agentchat.agent.providers.local.LocalProvider",
}


@dataclass(frozen=True)
class ProviderConfig:
    provider: str = "local"
    model: str = ""
    api_key: str = field(default="", repr=False)  # kept out of every repr, traceback and log line
    base_url: str = ""
    timeout: float = 60.0
    threads: int = 0  # local: the threads llama.cpp computes with; 0 is every core

    @classmethod
    def from_settings(cls) -> ProviderConfig:
        from django.conf import settings

        return cls(
            provider=settings.LLM_PROVIDER,
            model=settings.LLM_MODEL,
            api_key=settings.LLM_API_KEY,
            base_url=settings.LLM_BASE_URL,
            timeout=settings.LLM_TIMEOUT,
            threads=settings.LLM_THREADS,
        )


# Providers hold HTTP connection pools, which belong to the event loop that opened them: one per loop and config.
_providers: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[ProviderConfig, Provider]] = (
    weakref.WeakKeyDictionary()
)


def get_provider(config: ProviderConfig | None = None) -> Provider:
    """The provider the settings (or `config`) name, made once per event loop: a run reuses its connections."""
    config = config or ProviderConfig.from_settings()
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:
        return _make_provider(config)
    made = _providers.setdefault(loop, {})
    if config not in made:
        made[config] = _make_provider(config)
    return made[config]


def warm_up(config: ProviderConfig | None = None) -> None:
    """Let the configured provider get ready before the first request, if it has anything to get ready (the local
    model loads in the background)."""
    provider = _make_provider(config or ProviderConfig.from_settings())
    ready = getattr(provider, "warm_up", None)
    if ready is not None:
        ready()


def _make_provider(config: ProviderConfig) -> Provider:
    path = PROVIDERS.get(config.provider)
    if path is None:
        raise ProviderNotConfigured(
            f"LLM provider is not configured: LLM_PROVIDER {config.provider!r} is not one of {', '.join(PROVIDERS)}"
        )
    module_name, class_name = path.rsplit(".", 1)
    try:
        module = import_module(module_name)
    except ImportError as exc:
        raise ProviderNotConfigured(
            f"LLM provider is not configured: {config.provider} needs the package {exc.name!r}"
        ) from None
    return getattr(module, class_name)(config)
