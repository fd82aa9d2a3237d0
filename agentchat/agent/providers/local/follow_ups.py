"""Requests that go on from the conversation's earlier turns, which the model never reads (it reads the newest turn
only): "Who owns it?" means the ids of the last call that took any, "Deploy them" each of that turn's, "Run the
migrations" the one object the last turn was about, and "the second one" the second item of the last list shown; "next",
"дальше" or "page 3" the last search a page on ("the last page": the last); "Which of them are drafts?" the last search
narrowed; and "staging", after "Deploy dashboard 5" was asked where to, that request said whole."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from tools.files import ATTACHED, REFERENCED

from ..base import ChatMessage, ToolCall, ToolSchema
from . import answers
from .routing import (
    NUMBER,
    PER_PAGE,
    PICKED,
    WORD,
    each_of,
    names_its_action,
    new_call,
    said_args,
    unsaid_choices,
)

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
FIRST_OR_LAST_PAGE = re.compile(
    _LEAD + r"(?:(first|перв\w*)|last|последн\w*)\s+(?:page|страниц\w*)" + _TAIL, re.IGNORECASE
)
# A reply that says only what was asked for: "staging", "to prod please", "на стейджинг".
REPLY_WORDS = 4
# A request that points back at what the conversation was last about: "Who owns it?", "А кто его владелец?".
POINTS_BACK = re.compile(
    r"\b(it|its|this one|that one|this dashboard|that dashboard|он|она|оно|его|её|ее|него|неё|нему|ней|нём|этот|"
    r"этого|этому|этом)\b",
    re.IGNORECASE,
)
# Pointing back at all that the last turn was about: "Deploy them to staging", "Выкати их".
POINTS_BACK_TO_SEVERAL = re.compile(r"\b(them|these|those|both|их|они|эти|этих|оба|обоих|обе|обеих)\b", re.IGNORECASE)
# An item of the last list picked by its place: "the first one", "the 2nd dashboard", "the last one", "второй",
# "последнего"; not a page ("первая страница"), a time ("first deploy it", "в первый раз") nor another thing of
# the list's ("последний деплой").
PLACES = {
    "first": 1, "second": 2, "third": 3, "fourth": 4, "fifth": 5, "sixth": 6, "seventh": 7, "eighth": 8, "ninth": 9,
    "tenth": 10, "last": -1, "перв": 1, "втор": 2, "трет": 3, "четв": 4, "пят": 5, "шест": 6, "седьм": 7,
    "восьм": 8, "девят": 9, "десят": 10, "последн": -1,
}  # fmt: skip
PLACE = re.compile(
    r"\b(first|second|third|fourth|fifth|sixth|seventh|eighth|ninth|tenth|last|(?:[1-9]|10)(?:st|nd|rd|th))\s+"
    r"(?:one|dashboard|item|result|entry)\b"
    r"|\b(перв|втор|трет|четв[её]рт|пят|шест|седьм|восьм|девят|десят|последн)(?:ый|ой|ий|ого|его|ому|ему|ом|ем|ым|им)\b"
    r"(?!\s+(?:страниц|раз|деплой|выкат|коммит|миграц|ветк|релиз))",
    re.IGNORECASE,
)
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


def last_object(earlier: list[Earlier]) -> dict[str, int]:
    """The ids of the one object the last turn that made a call was about ("Run the migrations" after a look at
    dashboard 12: that one); none when that turn listed objects (a search) or took several."""
    last = [_ids(each.call) for each in earlier if each.turn == earlier[0].turn] if earlier else [{}]
    return last[0] if all(ids == last[0] for ids in last) else {}


def listed_at(request: str, earlier: list[Earlier]) -> dict[str, int]:
    """The id of the item the request picks by its place in the last list shown ("Deploy the first one to staging"
    after a search: the first dashboard found on the page shown, and "the second one" after that deployment), as
    PICKED; none when no call listed anything, or fewer items."""
    match = PLACE.search(request)
    ids = next((ids for each in earlier if (ids := _listed(each.result))), [])
    if match is None or not ids:
        return {}
    word = match.group(1) or match.group(2)
    place = (
        int(digits[0])
        if (digits := re.match(r"\d+", word))
        else next(value for stem, value in PLACES.items() if word.lower().startswith(stem))
    )
    return {PICKED: ids[place - 1 if place > 0 else place]} if place <= len(ids) else {}


def picks_unlisted(request: str, earlier: list[Earlier]) -> bool:
    """Whether the request picks an item by its place ("the fifth one") that no list shown has, and says no number."""
    return bool(PLACE.search(request)) and not NUMBER.search(request) and not listed_at(request, earlier)


def _listed(result: dict[str, Any]) -> list[int]:
    """The ids of the items a result lists, in its order."""
    items = result.get("items")
    if not isinstance(items, list):
        return []
    return [item["id"] for item in items if isinstance(item, dict) and type(item.get("id")) is int]


def pointed_at(request: str, earlier: list[Earlier], messages: list[ChatMessage]) -> dict[str, int]:
    """The ids of the earlier turns (`messages`, their calls `earlier`) a request means without saying them: an item
    of the last list by its place; when it points back ("it", "them"), the object of the request it answers, or
    else the last call's objects."""
    if picked := listed_at(request, earlier) or asked_about(request, messages):
        return picked
    if POINTS_BACK.search(request) or POINTS_BACK_TO_SEVERAL.search(request):
        return last_ids(earlier, request)
    return {}


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
    elif match := FIRST_OR_LAST_PAGE.search(request):
        asked = 1 if match.group(1) else None  # the last, once known
    else:
        return None
    if last is None:
        return Page(listed=False)
    pages = last.result.get("pages")
    pages = pages if type(pages) is int else 0
    if asked is None:
        asked = pages or current
    if asked < 1 or (pages and asked > pages):
        return Page(asked=asked, pages=pages)
    return Page(call=new_call(last.call["name"], {**last.call["args"], "page": asked}))


def looked_within(request: str, earlier: list[Earlier], tools: list[ToolSchema]) -> ToolSchema | None:
    """The offered tool of the last call, when the request looks within its results ("Which of them…?")."""
    if not earlier or not OF_THEM.search(request):
        return None
    return next((tool for tool in tools if tool["name"] == earlier[0].call["name"]), None)


def narrowed(call: ToolCall, earlier: list[Earlier], tool: ToolSchema) -> ToolCall:
    """A call of `tool` within the last call's results: that call's arguments and its own, from the first page."""
    kept = {name: value for name, value in earlier[0].call["args"].items() if name != "page"}
    return new_call(call["name"], {**kept, **said_args(call, tool)})


def _unanswered(messages: list[ChatMessage]) -> tuple[str, list[ChatMessage]] | None:
    """The last request, in the person's own words, and what came after it, when no call did."""
    asked = [index for index, message in enumerate(messages) if message["role"] == "user"]
    if not asked:
        return None
    previous, *after = messages[asked[-1] :]
    if any(message.get("tool_calls") for message in after):
        return None
    return previous["content"].split(ATTACHED, 1)[0].split(f"\n\n{REFERENCED}", 1)[0], after


def _asked_what_was_meant(after: list[ChatMessage]) -> bool:
    return any(message["role"] == "assistant" and answers.asked_what_was_meant(message["content"]) for message in after)


def asked_about(request: str, messages: list[ChatMessage]) -> dict[str, int]:
    """What a reply that points back ("check it") means after the question which tool was meant: the one object
    the request asked about said by its number ("Push dashboard 8 to production"), as PICKED."""
    last = _unanswered(messages)
    if last is None or not POINTS_BACK.search(request) or not _asked_what_was_meant(last[1]):
        return {}
    numbers = set(NUMBER.findall(PER_PAGE.sub(" ", last[0])))
    return {PICKED: int(numbers.pop())} if len(numbers) == 1 else {}


def completed(request: str, messages: list[ChatMessage], tools: list[ToolSchema]) -> str:
    """A short reply to the question the request before it got: which tool was meant ("deploy it" after "Push
    dashboard 8 to production"), or a value it left unsaid ("staging" after "Deploy dashboard 5"). That request and
    the reply together; any other request as it is."""
    last = _unanswered(messages)
    if last is None or len(WORD.findall(request)) > REPLY_WORDS:
        return request
    said, after = last
    together = f"{said} {request}"
    if _asked_what_was_meant(after):
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
