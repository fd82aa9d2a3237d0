"""Requests that go on from the conversation's earlier turns, which the model never reads (it reads the newest turn
only): "Who owns it?" means the ids of the last call that took any, and "Deploy them" each of that turn's; "next",
"дальше" or "page 3" the last search a page on; "Which of them are drafts?" the last search narrowed; and
"staging", after "Deploy dashboard 5" was asked where to, that request said whole.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from tools.files import ATTACHED, REFERENCED

from ..base import ChatMessage, ToolCall, ToolSchema
from . import answers
from .routing import NUMBER, POINTS_BACK_TO_SEVERAL, WORD, each_of, names_its_action, new_call, unsaid_choices

# An optional "and", "please" and "show me" around the words that ask for a page, in English and Russian.
_LEAD = (
    r"^\W*(?:(?:and|so|а|и|ну)\s+)?(?:please\s+|пожалуйста,?\s+)?"
    r"(?:(?:show|give|open|go to)(?: me)?\s+|(?:покажи|открой)\s+)?(?:the\s+)?"
)
_TAIL = r"(?:\s*,?\s*(?:please|пожалуйста))?\W*$"
NEXT_PAGE = re.compile(
    _LEAD
    + r"(?:next(?: page| ones?| \d{1,3})?|more|continue|go on|ещё|еще|дальше|следующ\w*(?: страниц\w*)?|продолж\w*)"
    + _TAIL,
    re.IGNORECASE,
)
PREVIOUS_PAGE = re.compile(
    _LEAD + r"(?:previous(?: page| ones?)?|предыдущ\w*(?: страниц\w*)?|назад)" + _TAIL, re.IGNORECASE
)
PAGE_NUMBER = re.compile(
    _LEAD + r"(?:(?:page|страниц\w*)\s+(\d{1,4})|(\d{1,4})(?:-?(?:ю|я|ая|ую))?\s+страниц\w*)" + _TAIL, re.IGNORECASE
)
# A reply that says only what was asked for: "staging", "to prod please", "на стейджинг".
REPLY_WORDS = 4
OF_THEM = re.compile(r"\b(?:of|among) (?:them|those|these)\b|\b(?:из|среди) (?:них|этих|тех)\b", re.IGNORECASE)


@dataclass(frozen=True)
class Earlier:
    """A call the conversation made that ran, and its result when that is a JSON object."""

    call: ToolCall
    result: dict[str, Any]
    turn: int  # the assistant message that made it, counted in the conversation


def earlier_calls(messages: list[ChatMessage]) -> list[Earlier]:
    """The calls that ran, newest first."""
    results = {
        message.get("tool_call_id"): message["content"]
        for message in messages
        if message["role"] == "tool" and message.get("outcome", "done") == "done"
    }
    calls = [
        (turn, call)
        for turn, message in enumerate(messages)
        for call in message.get("tool_calls", [])
        if call["id"] in results
    ]
    return [Earlier(call, _object(results[call["id"]]), turn) for turn, call in reversed(calls)]


def _object(text: str) -> dict[str, Any]:
    try:
        value = json.loads(text)
    except json.JSONDecodeError:
        return {}
    return value if isinstance(value, dict) else {}


def _ids(call: ToolCall) -> dict[str, int]:
    return {name: value for name, value in call["args"].items() if name.endswith("_id") and type(value) is int}


def last_ids(earlier: list[Earlier], request: str) -> dict[str, int]:
    """The ids (whole-number arguments named *_id) of the last call that took any: what a request pointing back
    ("Who owns it?") is about. One pointing at several ("Deploy them") means the last turn's objects, and none
    when that turn took no ids (a search listed them)."""
    several = POINTS_BACK_TO_SEVERAL.search(request)
    return next((ids for each in earlier if (ids := _ids(each.call)) or several), {})


def each_pointed(call: ToolCall, request: str, earlier: list[Earlier]) -> list[ToolCall]:
    """The call once for each object of the last turn that took ids, when the request points back at all of them
    ("Deploy them to staging" after "How healthy are dashboards 3 and 5?"): the model itself took one of them."""
    last = earlier[0] if earlier else None
    if last is None or not POINTS_BACK_TO_SEVERAL.search(request) or NUMBER.search(request):
        return [call]
    for name, value in _ids(call).items():
        objects = [
            ids[name] for each in reversed(earlier) if each.turn == last.turn and name in (ids := _ids(each.call))
        ]
        if value in objects and len(set(objects)) > 1:
            return each_of(call, name, objects)
    return [call]


@dataclass(frozen=True)
class Page:
    """Another page of an earlier call: `call` to make, or, when there is no such page, the page asked for and how
    many the results have; or, when no list was shown to turn the page of, not `listed`."""

    call: ToolCall | None = None
    asked: int = 0
    pages: int = 0
    listed: bool = True


def another_page(request: str, earlier: list[Earlier], tools: list[ToolSchema]) -> Page | None:
    """What a request for another page of the last paged call's results ("next", "дальше", "page 3") asks for;
    None when it asks for something else. Only a tool that reads is called again so: one that acts is called only
    when a request says its action."""
    paged = {
        tool["name"]: tool
        for tool in tools
        if not tool.get("action_words") and _integer_default(tool, "page") is not None
    }
    last = next((each for each in earlier if each.call["name"] in paged), None)
    current = last.call["args"].get("page", _integer_default(paged[last.call["name"]], "page")) if last else 1
    if NEXT_PAGE.search(request):
        asked = current + 1
    elif PREVIOUS_PAGE.search(request):
        asked = current - 1
    elif match := PAGE_NUMBER.search(request):
        asked = int(match.group(1) or match.group(2))
    else:
        return None
    if last is None:
        return Page(listed=False)
    pages = last.result.get("pages")
    if asked < 1 or (type(pages) is int and asked > pages):
        return Page(asked=asked, pages=pages if type(pages) is int else 0)
    return Page(call=new_call(last.call["name"], {**last.call["args"], "page": asked}))


def looked_within(request: str, earlier: list[Earlier], tools: list[ToolSchema]) -> ToolSchema | None:
    """The offered tool of the last call, when the request looks within its results ("Which of them…?")."""
    if not earlier or not OF_THEM.search(request):
        return None
    return next((tool for tool in tools if tool["name"] == earlier[0].call["name"]), None)


def narrowed(call: ToolCall, earlier: list[Earlier], tool: ToolSchema) -> ToolCall:
    """A call of `tool` within the last call's results: that call's arguments and its own, from the first page."""
    properties = tool["parameters"].get("properties", {})
    said = {name: value for name, value in call["args"].items() if properties.get(name, {}).get("default") != value}
    kept = {name: value for name, value in earlier[0].call["args"].items() if name != "page"}
    return new_call(call["name"], {**kept, **said})


def completed(request: str, messages: list[ChatMessage], tools: list[ToolSchema]) -> str:
    """A short reply to the question the request before it got: which tool was meant ("deploy it" after "Push
    dashboard 8 to production"), or a value it left unsaid ("staging" after "Deploy dashboard 5"). That request and
    the reply together; any other request as it is."""
    asked = [index for index, message in enumerate(messages) if message["role"] == "user"]
    if not asked or len(WORD.findall(request)) > REPLY_WORDS:
        return request
    previous, *after = messages[asked[-1] :]
    if any(message.get("tool_calls") for message in after):
        return request
    said = previous["content"].split(ATTACHED, 1)[0].split(f"\n\n{REFERENCED}", 1)[0]
    together = f"{said} {request}"
    if any(message["role"] == "assistant" and answers.asked_what_was_meant(message["content"]) for message in after):
        return together
    for tool in tools:
        unsaid = unsaid_choices(said, tool)
        if unsaid and names_its_action(said, tool) and len(unsaid_choices(together, tool)) < len(unsaid):
            return together
    return request


def _integer_default(tool: ToolSchema, name: str) -> int | None:
    field = tool["parameters"].get("properties", {}).get(name, {})
    default = field.get("default")
    return default if field.get("type") == "integer" and type(default) is int else None
