"""The system prompt: who the agent is and what the page shows."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

BASE_PROMPT = """You are AgentChat's assistant. You help the signed-in user by answering and by acting with tools.
- Use a tool when it can answer better than you can from memory; never invent a tool's result.
- Tools run with the user's own permissions. Some actions wait for the user's approval: say what you asked for and wait.
- When a tool fails, explain what went wrong in plain words and suggest what to do next.
- Answer in the language the user writes in. Be brief; use Markdown lists and tables where they help."""

CONTEXT_LIMIT = 2000
PAGE = "What the page shows (JSON): "


def _describe_focus(focus: Mapping[str, Any]) -> str:
    kind, ident = focus.get("type"), focus.get("id")
    if not kind or ident is None:
        return ""
    return (
        f'The user is looking at {kind} {ident}. When they say "it", "this" or "this {kind}", they mean {kind} {ident}.'
    )


def build_system_prompt(context: Mapping[str, Any] | None = None, sections: Sequence[str] = ()) -> str:
    """`context` is what the page shows, e.g. {"focus": {"type": "dashboard", "id": 42}}; `sections` are what
    the toolsets have to say about this conversation (e.g. its files), each a paragraph."""
    parts = [BASE_PROMPT]
    if context:
        focus = context.get("focus")
        if isinstance(focus, Mapping) and (sentence := _describe_focus(focus)):
            parts.append(sentence)
        shown = json.dumps(context, ensure_ascii=False, default=str)
        if len(shown) > CONTEXT_LIMIT:
            shown = shown[:CONTEXT_LIMIT] + " …(cut)"
        parts.append(PAGE + shown)
    parts.extend(sections)
    return "\n\n".join(parts)


def page_shown(system_prompt: str) -> str:
    """What `system_prompt` says the page shows, as JSON; "" when it says nothing of it."""
    start = system_prompt.find(PAGE)
    return "" if start < 0 else system_prompt[start + len(PAGE) :].split("\n", 1)[0]
