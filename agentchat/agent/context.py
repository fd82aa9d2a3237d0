"""What of a conversation reaches the model: history trimming to a token budget and long-message truncation.

Tokens are counted offline (agentchat.tokens).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass

from agentchat.tokens import count_tokens

from .providers import ChatMessage

# Like OpenAI's accounting: role and separators cost a few tokens on top of the content.
MESSAGE_OVERHEAD = 4
# What one image part costs a vision model, about: OpenAI's price of a 1024-pixel image in detail.
IMAGE_TOKENS = 765

TRUNCATION_LIMIT = 100_000
TRUNCATION_SUFFIX = "\n\n[...truncated]"
BOUNDARY_WINDOW = 2_000

_SENTENCE_ENDS = (". ", "! ", "? ")
_CJK_SENTENCE_ENDS = ("。", "！", "？")


def message_tokens(message: ChatMessage) -> int:
    tokens = MESSAGE_OVERHEAD + count_tokens(message.get("content") or "")
    tokens += IMAGE_TOKENS * len(message.get("images") or ())
    for call in message.get("tool_calls") or ():
        tokens += count_tokens(call["name"]) + count_tokens(json.dumps(call["args"]))
    return tokens


def marker_message(dropped: int) -> ChatMessage:
    what = "1 earlier message was" if dropped == 1 else f"{dropped} earlier messages were"
    return {"role": "system", "content": f"[{what} left out to fit the context budget.]"}


@dataclass(frozen=True)
class Trimmed:
    messages: list[ChatMessage]
    dropped: int  # messages left out; when > 0, messages[0] is the marker saying so


def _units(messages: Sequence[ChatMessage]) -> list[list[ChatMessage]]:
    """Split history into runs that stand or fall together: a message and the tool results that follow it.

    A provider rejects a tool result whose call it cannot see, so tool messages always ride with the
    assistant message before them.
    """
    units: list[list[ChatMessage]] = []
    for message in messages:
        if message["role"] == "tool" and units:
            units[-1].append(message)
        else:
            units.append([message])
    return units


def fit_history(messages: Sequence[ChatMessage], *, budget: int, system_prompt: str = "") -> Trimmed:
    """The history to send so that it, the system prompt and any marker come to at most `budget` tokens.

    The newest turn (the last user message and all after it) is kept whatever it costs; before it, the
    newest whole units that fit, stopping at the first that does not so the history stays contiguous.
    When something was left out, a marker saying how much goes first, and older units give way to it.
    The result is over budget only when the system prompt, the newest turn and the marker alone are:
    the marker stays then, so that the model knows the conversation did not start there.
    """
    messages = list(messages)
    if not messages:
        return Trimmed(messages=[], dropped=0)

    user_indexes = [i for i, message in enumerate(messages) if message["role"] == "user"]
    units = _units(messages[: user_indexes[-1]] if user_indexes else messages)
    newest = messages[user_indexes[-1] :] if user_indexes else units.pop()

    used = sum(message_tokens(message) for message in newest)
    if system_prompt:
        used += message_tokens({"role": "system", "content": system_prompt})
    # Counted from the newest unit back, no further than the first that does not fit: a run of a long conversation
    # counts what its budget holds, not all it has ever said.
    costs: dict[int, int] = {}
    kept_from = len(units)
    while kept_from > 0:
        costs[kept_from - 1] = sum(message_tokens(message) for message in units[kept_from - 1])
        if used + costs[kept_from - 1] > budget:
            break
        kept_from -= 1
        used += costs[kept_from]

    # A history that begins with tool results has lost their call already; they can never be sent.
    if kept_from == 0 and units and units[0][0]["role"] == "tool":
        used -= costs[0]
        kept_from = 1

    if kept_from == 0:
        return Trimmed(messages=messages, dropped=0)

    # The marker must fit too: give up the oldest kept units until it does.
    dropped = sum(len(unit) for unit in units[:kept_from])
    while kept_from < len(units) and used + message_tokens(marker_message(dropped)) > budget:
        used -= costs[kept_from]
        dropped += len(units[kept_from])
        kept_from += 1

    kept = [message for unit in units[kept_from:] for message in unit]
    return Trimmed(messages=[marker_message(dropped), *kept, *newest], dropped=dropped)


def truncate_message(text: str, limit: int = TRUNCATION_LIMIT) -> tuple[str, bool]:
    """Cut `text` longer than `limit` characters, preferring a sentence end, then a space, near the limit.

    The kept part is at most `limit` characters; TRUNCATION_SUFFIX is appended after it, so the result
    may be up to `limit + len(TRUNCATION_SUFFIX)` long. Returns the text and whether it was cut.
    """
    if len(text) <= limit:
        return text, False

    low = max(0, limit - BOUNDARY_WINDOW)
    candidates = [text.rfind(end, low, limit + 1) + 1 for end in _SENTENCE_ENDS]  # keep the mark, drop the space
    candidates += [text.rfind(end, low, limit) + 1 for end in _CJK_SENTENCE_ENDS]
    candidates.append(text.rfind("\n", low, limit + 1))  # a line or paragraph ends before the newline
    cut = max(candidates)
    if cut <= 0:
        cut = next((i for i in range(limit, low - 1, -1) if text[i].isspace()), 0)
    if cut <= 0:
        cut = limit
    return text[:cut].rstrip() + TRUNCATION_SUFFIX, True
