"""Which tool, if any, a request calls for, decided the same way every time:

1. the two tool examples most like the request (tools may declare typical requests with their arguments; likeness
   is shared letter trigrams, so any language) are shown as earlier turns answered with JSON
   {"tool": <name>, "args": {...}}; a small-talk example answered {"tool": "none"} takes the place of the farther
   one when the request is more like small talk than like any tool;
2. the model's log-likelihood of writing each offered tool's name, or "none", after `{"tool": "` is measured, and
   SIMILARITY_WEIGHT times the request's likeness to that tool (its examples, or its description's first
   paragraph) is added; the highest wins;
3. the arguments are then generated at temperature 0 under a grammar made from that tool's schema.

The figures below were measured with tests/eval/test_routing.py on its first two tuning sets (34 requests).
"""

from __future__ import annotations

import itertools
import json
import logging
import math
import re
import secrets
from collections import Counter
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from stop_words import get_stop_words

from ...prompts import page_shown
from ..base import ToolCall, ToolSchema
from .chatml import chat_prompt, prompt_tokens
from .llama import DECISION_SAMPLING, arguments_grammar, evaluate, generate, log_likelihoods
from .model import Watch

if TYPE_CHECKING:
    from llama_cpp import Llama

logger = logging.getLogger(__name__)

DECISION_MAX_TOKENS = 256
# How many examples a decision is shown: two chose the tool right 31 times in 34, one or three 30, four 29; all of
# them at once did far worse (the 135M model follows whichever examples it sees, and many unrelated ones confuse it).
EXAMPLES_SHOWN = 2
# Weight, in nats, of how close the request is (0 to 1) to a tool's closest example, added to the model's
# log-likelihood of naming that tool. Either alone chose right 30 times in 34; together, 31.
SIMILARITY_WEIGHT = 10.0
# How far, in the same units, the chosen tool must score above the next tool for a call to be made; closer, the
# person is asked which they meant (below it against "none", the tool is still called). On the 52 tuning requests
# the two wrong calls closest to another tool were 0.11 and 0.51 apart, and no right one was under 2.8.
MARGIN = 1.0
# The no-tool side of the examples: small talk and general questions, in English and Russian. Nothing here is
# about any one toolset.
NO_TOOL_EXAMPLES = (
    "Hello!",
    "Good morning",
    "Thanks!",
    "Bye!",
    "What can you do?",
    "Tell me something interesting",
    "Explain what an API is",
    "Привет!",
    "Добрый день!",
    "Спасибо!",
    "Пока!",
    "Что ты умеешь?",
    "Расскажи анекдот",
    "Объясни, что такое API",
    "Как тебя зовут?",
    "Кто ты?",
)
NO_TOOL = "none"
WORD = re.compile(r"\w+")
CALL_LEAD = '{"tool": "'
CYRILLIC = re.compile(r"[а-яё]", re.IGNORECASE)
# A question (not a request put as one) asks about something; it never calls for a tool that waits for approval,
# even when it names the action: "Is it safe to deploy dashboard 9?" is for the tool that reads.
QUESTION = re.compile(
    r"\?\s*$|^\s*(is|are|was|were|can|could|should|would|will|do|does|did|may|might|has|have|what|which|why|how|"
    r"when|where|who|ли|можно|стоит|нужно|надо|какие|какой|какая|сколько|что|почему|зачем|как|когда|где|кто)\b",
    re.IGNORECASE,
)
# A request to be shown something names an action only to ask about it: "Show the migrations to run on dashboard 5".
SHOWING = re.compile(
    r"^\W*(?:please\s+|пожалуйста,?\s+)?(?:show|list|display|tell|find|покажи|выведи|перечисли|расскажи|найди)\b",
    re.IGNORECASE,
)
ASKING = re.compile(
    r"\b(can|could|would|will) you\b|\bplease\b|\bможешь\b|\bможете\b|\bпожалуйста\b|\bне мог(ли|ла)? бы\b",
    re.IGNORECASE,
)


@dataclass(frozen=True)
class Decision:
    """A call to make; or, when two tools scored too close to tell (`unsure`), those two; or, when the request does
    not say a value the tool cannot do without (`unsaid`: "Deploy dashboard 5", to where?), the tool and that
    argument's name; or none of these: no tool."""

    call: ToolCall | None = None
    unsure: tuple[ToolSchema, ToolSchema] | None = None
    unsaid: tuple[ToolSchema, str] | None = None


def language_of(text: str) -> str:
    """ "ru" when the text has Cyrillic letters, else "en": the two languages the demo model is set up for."""
    return "ru" if CYRILLIC.search(text) else "en"


def names_its_action(request: str, tool: ToolSchema) -> bool:
    """Whether the request asks for what a tool that waits for approval does: its action in words, and not as a
    question about it."""
    words = tool.get("action_words")
    if not words:
        return True
    if not any(re.search(word, request, re.IGNORECASE) for word in words) or SHOWING.search(request):
        return False
    return not QUESTION.search(request) or bool(ASKING.search(request))


def closest_example(request: str, tool: ToolSchema, language: str) -> str | None:
    """The tool's example request in `language` most like `request`, if it has one in that language."""
    asked = _trigrams(request)
    examples = [
        example["request"] for example in tool.get("examples", []) if language_of(example["request"]) == language
    ]
    return max(examples, key=lambda text: similarity(asked, _trigrams(text)), default=None)


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
    # A null the grammar let through says "not given": left out, as the person would leave it.
    return new_call(decision["tool"], {key: value for key, value in decision["args"].items() if value is not None})


def new_call(name: str, args: dict[str, Any]) -> ToolCall:
    return ToolCall(id=f"call_{secrets.token_hex(12)}", name=name, args=args)


# The word after one that says a name follows is a name, even a common word: "a branch called test".
NAMED = re.compile(
    r"\b(?:called|named|titled|под названием|с названием|с именем|названием|именем)\s+[«\"“'‘]?([\w./-]+)",
    re.IGNORECASE,
)
# The key of an item picked from a list by its place ("the first one", follow_ups.listed_at): a list's items are
# any tool's objects, so its id fills whichever whole-number argument the chosen tool needs.
PICKED = "id"
# A number standing alone: not part of a word, a name or a sum ("v2", "fix-4", "2+2").
NUMBER = re.compile(r"(?<![\w+*/=-])\d{1,9}(?![\w+*/=-])")
# A number of things a page shows ("20 per page", "по 20 на странице"): only a page size's, never an id.
PER_PAGE = re.compile(
    r"(?<![\w+*/=-])(\d{1,9})\s+(?:\w+\s+)?(?:(?:per|a|each|on a|on each)\s+page|на\s+страниц\w*)\b", re.IGNORECASE
)
PAGE_SIZES = frozenset({"page_size", "per_page"})
# The next number of a list: "3, 4 and 7", "3 & 4", "3 и 4"; not "3 or 4", which asks which.
LISTED_NEXT = re.compile(r"\s*(?:,|&|\band\b|\bи\b)(?:\s*(?:and|и)\b)?\s*(?P<number>\d{1,9})(?!\w)", re.IGNORECASE)
MOST_LISTED = 10
EDGE_PUNCTUATION = "?!.,:;«»\"'“”„()[]"
PHRASE_WORDS = 4
# Words that say how something is asked, not what ("my", "show", "меня", "есть"), in the two languages the demo
# model is set up for: whichever words the tools' examples happen to contain.
# The package's Russian list has "кто" but not the whose-words: "Чьи дашборды про продажи?" asks about «продажи».
# Nor the words that say a name follows (NAMED): "a branch called fix" is named «fix».
STOP_WORDS = frozenset(get_stop_words("en") + get_stop_words("ru")) | {
    "чей",
    "чья",
    "чьё",
    "чьи",
    "called",
    "named",
    "titled",
    "названием",
    "именем",
    # "какой" and "какая" are there, not their other forms.
    "какие",
    "каких",
    "каким",
    "какими",
    "какую",
    "какое",
    "каком",
    "какому",
}
# Russian's indefinite pronouns are written with a hyphen ("что-нибудь", "кто-то", "какие-либо"), which the stop-word
# list, of single words, does not hold.
INDEFINITE = re.compile(r"\w+-(?:нибудь|либо|то)", re.IGNORECASE)


def _words(text: str) -> list[str]:
    return [word for word in (piece.strip(EDGE_PUNCTUATION) for piece in text.split()) if word]


def _stem(word: str) -> str:
    return word.lower()[:4]


def _integer(field: dict[str, Any]) -> bool:
    return field.get("type") == "integer" or any(member.get("type") == "integer" for member in field.get("anyOf", []))


def _number_stems(tool: ToolSchema) -> dict[str, set[str]]:
    """For each whole-number argument, how the words right before its value begin: as its own name does
    ("dashboard_id": "dash") or as in the tool's examples ("дашборда 5": "дашб")."""
    properties = tool["parameters"].get("properties", {})
    stems = {name: {_stem(name)} for name, field in properties.items() if _integer(field)}
    for example in tool.get("examples", []):
        words = _words(example["request"])
        for name, value in example["args"].items():
            if name in stems and isinstance(value, int):
                stems[name].update(_stem(before) for before, word in itertools.pairwise(words) if word == str(value))
    return stems


def takes_pointed(tool: ToolSchema, pointed: dict[str, int]) -> bool:
    """Whether the tool takes what the request points at: an id of the same name, or any id for an item picked from a
    list (PICKED)."""
    return bool(pointed.keys() & tool["parameters"].get("properties", {}).keys()) or (
        PICKED in pointed and needs_a_number(tool)
    )


def names_by_number(request: str, tool: ToolSchema) -> bool:
    """Whether the request names by its number ("dashboard 16", "дашборда 16") what one of the tool's whole-number
    arguments takes."""
    stems = set().union(*_number_stems(tool).values())
    return any(
        _stem(previous) in stems for previous, word in itertools.pairwise(_words(request)) if NUMBER.fullmatch(word)
    )


def each_listed(call: ToolCall, request: str, tool: ToolSchema) -> list[ToolCall]:
    """The call once for each number of a list said after the word of the whole-number argument it took
    ("dashboards 3, 4 and 7", "дашборды 3 и 4"): one call an object, as a full model makes them, up to
    MOST_LISTED, each within the argument's bounds as the model's own is. The model itself picks one number: the
    others take its other arguments."""
    for name, stems in _number_stems(tool).items():
        value = call["args"].get(name)
        if type(value) is not int:
            continue
        for said in re.finditer(rf"(\w+)\s+{value}(?!\w)", request):
            if _stem(said[1]) not in stems:
                continue
            numbers, end = [value], said.end()
            while len(numbers) < MOST_LISTED and (more := LISTED_NEXT.match(request, end)):
                numbers.append(int(more["number"]))
                end = more.end()
            field = tool["parameters"].get("properties", {}).get(name, {})
            low, high = field.get("minimum", -math.inf), field.get("maximum", math.inf)
            within = [number for number in numbers if low <= number <= high]
            if len(set(within)) > 1:
                return each_of(call, name, within)
    return [call]


def each_of(call: ToolCall, name: str, numbers: list[int]) -> list[ToolCall]:
    """The call once for each of `numbers` as its argument `name`, in their order: the call itself for the number
    it took, a copy with its other arguments for each other one."""
    return [
        call if number == call["args"][name] else new_call(call["name"], {**call["args"], name: number})
        for number in dict.fromkeys(numbers)
    ]


def needed_numbers(tool: ToolSchema) -> list[str]:
    """The required whole-number arguments (ids), which the request must say."""
    properties = tool["parameters"].get("properties", {})
    return [name for name in tool["parameters"].get("required", []) if _integer(properties.get(name, {}))]


def needs_a_number(tool: ToolSchema) -> bool:
    """Whether a call needs a whole number (an id) that the request must say."""
    return bool(needed_numbers(tool))


def grounded(tool: ToolSchema, request: str, common: set[str], page: str = "") -> dict[str, Any]:
    """The tool's arguments schema held to what the request says, so that the model picks and cannot invent:

    - a free string is one of the request's phrases (up to four words) that begins and ends with a word of its
      own, not one of `common`, the words example requests are made of ("find", "dashboards"), nor a stop word
      ("my", "меня"), nor a word that names a choice ("errors") or is a cue word ("owned"), or its default; an
      optional one the request has no such phrase for, or whose cue words (a tag's "tag", "тег") it does not say,
      is left out;
    - a whole number is one of the request's numbers or its default, and only the one after a word like the
      argument's name when there is one ("migration 5 of dashboard 3": dashboard_id 3), never one after another
      argument's word; a required one the request has no number for is one of `page`'s (what the page shows:
      "How healthy is it?" on dashboard 42); an optional one left with no number is left out;
    - a choice the request names (one value of an enum, "staging"; true or false of a yes/no field with choice
      words) is that value, and no longer optional; an optional choice with choice words the request names no
      value of is left out;
    - for a tool with cue words (a search), the request's own phrases are not optional: the argument they cue, or
      else the first free string, must take one.

    A field the request says nothing for keeps its schema.
    """
    parameters = tool["parameters"]
    words = _words(request)
    # A word that names a choice ("errors": with problems) is that choice's, and a cue word ("owns") points at an
    # argument: neither is a phrase to search for. Nor is a word that says the tool's action ("Сделай ветку"), unless
    # it is part of a name ("new-filters").
    choices = tool.get("choice_words", {}).values()
    cue_patterns = [pattern for cued in tool.get("cue_words", {}).values() for pattern in cued]
    acting = tool.get("action_words", [])
    # "20 per page" says how many, not what to find.
    per_page = {int(number) for number in PER_PAGE.findall(request)}
    common = (
        common
        | {word.lower() for said in PER_PAGE.finditer(request) for word in _words(said[0])}
        | _words_named(request, [pattern for choice in choices for named in choice.values() for pattern in named])
        | {
            word.lower()
            for word in words
            if any(re.match(p, word, re.IGNORECASE) for p in cue_patterns)
            or (word.isalpha() and any(re.match(p, word, re.IGNORECASE) for p in acting))
        }
    )
    phrases = list(
        dict.fromkeys(
            [
                " ".join(words[start : start + length])
                for length in range(1, PHRASE_WORDS + 1)
                for start in range(len(words) - length + 1)
                if _own(words[start], common) and _own(words[start + length - 1], common)
            ]
            + NAMED.findall(request)
        )
    )
    numbers = sorted({int(number) for number in NUMBER.findall(request)} - per_page)
    shown = sorted({int(number) for number in NUMBER.findall(page)})
    before: dict[int, set[str]] = {}
    # The number said right after an argument's whole name ("page 2") is that argument's, not one whose name only
    # begins the same ("page_size").
    said_after: dict[int, set[str]] = {}
    for previous, word in itertools.pairwise(words):
        if NUMBER.fullmatch(word):
            before.setdefault(int(word), set()).add(_stem(previous))
            said_after.setdefault(int(word), set()).add(previous.lower())
    stems = _number_stems(tool)
    required = list(parameters.get("required", []))
    worded: list[str] = []  # the free strings that may take one of the request's phrases

    def ground(name: str, field: dict[str, Any]) -> dict[str, Any] | None:
        """The field held to the request; None: the request gives it nothing it may take, so it is left out."""
        if "anyOf" in field:
            members = [member for member in (ground(name, member) for member in field["anyOf"]) if member]
            if name in required:  # a named choice: its null is no longer a choice
                members = [member for member in members if member.get("type") != "null"]
            # Only null left: the field is left out, which says the same.
            return {**field, "anyOf": members} if any(member.get("type") != "null" for member in members) else None
        words = tool.get("choice_words", {}).get(name, {})
        if "enum" in field or (field.get("type") == "boolean" and words):
            named = _named(request, _choices(field, words))
            if len(named) == 1:
                required.append(name)
                return {**field, "enum": named}
            # The tool says how each value is named, and the request names none, or several ("errors or
            # warnings"): not the model's to choose; left out, the tool takes them all.
            if words and name not in required:
                return None
            return field
        if "const" in field or field.get("format"):
            return field
        default = field.get("default")
        cues = tool.get("cue_words", {}).get(name)
        if cues and name not in required and not any(re.search(cue, request, re.IGNORECASE) for cue in cues):
            return None
        if field.get("type") == "string":
            longest = field.get("maxLength", 10_000)
            values = [phrase for phrase in phrases if len(phrase) <= longest]
            # A cue that says where its value runs ("with message …" to the end) gives exactly that.
            values = [value for value in _cued_values(request, cues or []) if len(value) <= longest] or values
            worded.extend([name] if values else [])
            values += [default] if isinstance(default, str) and default else []
        elif field.get("type") == "integer":
            low, high = field.get("minimum", -math.inf), field.get("maximum", math.inf)
            values = [number for number in numbers if low <= number <= high]
            others_named = {other for other in parameters.get("properties", {}) if other != name}
            placed = [
                number
                for number in values
                if before.get(number, set()) & stems.get(name, set())
                and not said_after.get(number, set()) & others_named
            ]
            if name in PAGE_SIZES and per_page:
                values = placed = sorted(number for number in per_page if low <= number <= high)
            # A number after another argument's word is that one's ("dashboard 11" is not a migration id).
            others = set().union(*(stem for field_name, stem in stems.items() if field_name != name))
            values = placed or [number for number in values if not before.get(number, set()) & others]
            # "migration 2" says which: the model may neither leave it out (the tool would take another) nor put
            # the default in its place ("page 2": not 1).
            required.extend([name] if placed else [])
            # An optional number the request does not say is left out, or left at its default (page 1): never
            # one the model makes up ("Run them": migration 4).
            if not values and name not in required and (numbers or not isinstance(default, int)):
                return None
            if not values and name in required:
                values = [number for number in shown if low <= number <= high]
            values += [default] if isinstance(default, int) and not isinstance(default, bool) and not placed else []
        else:
            return field
        if not values:
            # An optional string the request has no phrase for is left out: the model would make one up.
            return None if field.get("type") == "string" and name not in required else field
        kept = {key: value for key, value in field.items() if key in ("description", "title", "default")}
        return {**kept, "enum": list(dict.fromkeys(values))}

    properties = {
        name: kept for name, field in parameters.get("properties", {}).items() if (kept := ground(name, field))
    }
    if worded and "cue_words" in tool:
        # A tool whose free arguments are told apart by cue words (a search) never leaves the request's own words
        # out: they go to the argument they name ("owned by"), or else to the first that takes words ("published
        # dashboards about marketing": status and query). Elsewhere an optional name or message is left to the tool.
        cued = [name for name in worded if name in tool["cue_words"]]
        required.append((cued or worded)[0])
    return {**parameters, "properties": properties, "required": list(dict.fromkeys(required))}


def _words_named(request: str, patterns: list[str]) -> set[str]:
    """The words, whole and in lower case, that a match of any of the patterns takes in ("are fine": both)."""
    named = set()
    for match in (found for pattern in patterns for found in re.finditer(pattern, request, re.IGNORECASE)):
        start, end = match.span()
        start = len(re.sub(r"\w+$", "", request[:start]))
        end += len(re.match(r"\w*", request[end:])[0])
        named.update(word.lower() for word in _words(request[start:end]))
    return named


def _cued_values(request: str, cues: list[str]) -> list[str]:
    """The text a cue pattern captures as its `value` group, without the quotes around it."""
    found = (re.search(cue, request, re.IGNORECASE) for cue in cues if "(?P<value>" in cue)
    values = (match["value"].strip().strip(EDGE_PUNCTUATION).strip() for match in found if match)
    return [value for value in values if value]


def said_args(call: ToolCall, tool: ToolSchema) -> dict[str, Any]:
    """The call's arguments other than their defaults: what the request said."""
    properties = tool["parameters"].get("properties", {})
    return {
        name: value for name, value in call["args"].items() if properties.get(name, {}).get("default", ...) != value
    }


def speaks_of(request: str, tool: ToolSchema) -> bool:
    """Whether the request has a word of the tool's own, of its name or of its examples, as the word begins
    ("dashboards", "дашбордов"), other than a stop word."""
    said = [word for example in tool.get("examples", []) for word in _words(example["request"])]
    own = {_stem(word) for word in [*said, *tool["name"].split("__")[-1].split("_")] if _own(word, set())}
    return any(_stem(word) in own for word in _words(request) if _own(word, set()))


def example_words(tools: list[ToolSchema]) -> set[str]:
    """The words of the tools' example requests that are not in their arguments, and the verb each tool's name
    begins with ("search" of search_dashboards): how requests are put."""
    said = {tool["name"].split("__")[-1].split("_")[0].lower() for tool in tools}
    values = set()
    for example in (example for tool in tools for example in tool.get("examples", [])):
        said.update(word.lower() for word in _words(example["request"]))
        values.update(word.lower() for value in example["args"].values() for word in _words(str(value)))
    return said - values


def _own(word: str, common: set[str]) -> bool:
    lowered = word.lower()
    return len(word) > 2 and lowered not in common and lowered not in STOP_WORDS and not INDEFINITE.fullmatch(word)


def _choices(field: dict[str, Any], words: dict[str, list[str]]) -> dict[Any, list[str]]:
    """The patterns that name each value of a field with a fixed set of values: an enum's value itself and its
    choice words; a yes/no field's choice words for "true" and "false"."""
    if "enum" in field:
        return {
            value: [rf"\b{re.escape(value)}", *words.get(value, [])]
            for value in field["enum"]
            if isinstance(value, str)
        }
    return {True: words.get("true", []), False: words.get("false", [])}


def unsaid_choices(request: str, tool: ToolSchema) -> list[str]:
    """The required arguments with a fixed set of values and no default of which the request names no value: the
    model would pick one ("production") that nobody asked for."""
    parameters = tool["parameters"]
    words = tool.get("choice_words", {})
    return [
        name
        for name in parameters.get("required", [])
        if len((field := parameters.get("properties", {}).get(name, {})).get("enum", [])) > 1
        and "default" not in field
        and not _named(request, _choices(field, words.get(name, {})))
    ]


def _named(request: str, choices: dict[Any, list[str]]) -> list[Any]:
    """The values the request names; of several, the one whose words take in all the others' ("without problems"
    names false, though "problems" alone names true)."""
    spans = {}
    for value, patterns in choices.items():
        found = [match.span() for pattern in patterns if (match := re.search(pattern, request, re.IGNORECASE))]
        if found:
            spans[value] = max(found, key=lambda span: span[1] - span[0])
    covering = [
        value
        for value, (start, end) in spans.items()
        if all(start <= other_start and other_end <= end for other_start, other_end in spans.values())
    ]
    return covering or list(spans)


def decide(
    llm: Llama,
    system_prompt: str,
    history: list[dict[str, str]],
    tools: list[ToolSchema],
    watch: Watch,
    pointed: dict[str, int] | None = None,
    within: ToolSchema | None = None,
    *,
    about: dict[str, int] | None = None,
) -> Decision:
    """The tool to call and its arguments; two tools it cannot tell apart; or no tool (module docstring).
    `pointed`: the ids of the earlier turns the request means without saying them ("it", "the first one":
    follow_ups.pointed_at), taken when the page shows nothing; `within`: the tool whose last results the request
    looks within ("Which of them…?"), which is then called without a choice; `about`: the one object the last turn
    was about (follow_ups.last_object), taken for the ids a chosen action cannot do without when nothing else says
    them ("Run the migrations" after a look at dashboard 12), as a person would mean it."""
    request = history[-1]["content"]
    # Numbers the person may mean: the request's, and the page's (the system prompt says which dashboard is shown),
    # not those of the rest of the system prompt (the attached files' sizes and row counts).
    page = page_shown(system_prompt)
    # "Who owns it?" after a look at dashboard 12 means that one, as much as "dashboard 12" would. Its numbers go
    # first: "Run migration 2 on it" is migration 2 of the dashboard pointed at.
    pointed = dict(pointed or {}) if not page and not within else {}
    page = page or (json.dumps(pointed) if pointed else "")
    numbered = NUMBER.search(PER_PAGE.sub(" ", request)) is not None or NUMBER.search(page) is not None
    # How requests are put, from every tool's examples: "Какие" is a health check's as much as a search's.
    common = example_words(tools)
    # A tool that needs a number the request does not give is not offered, unless the request says its action in
    # words ("Deploy it to staging" with nothing to point at): then, if chosen, it asks which one.
    tools = [
        tool
        for tool in tools
        if names_its_action(request, tool) and (numbered or not needs_a_number(tool) or tool.get("action_words"))
    ]
    # "dashboard 16" names one object, and so do "it" and "the first one": then only the tools that take it by its
    # number are meant.
    naming = [tool for tool in tools if names_by_number(request, tool) or takes_pointed(tool, pointed)]
    tools = naming or tools
    shown, closest = choose_examples(request, tools)
    messages = decision_messages(system_prompt, history, tools, shown)
    prompt = chat_prompt(llm, messages) + CALL_LEAD
    if len(history) == 1:
        # Every conversation's first request with these tools starts the same way, up to the examples.
        beginning = prompt_tokens(llm, chat_prompt(llm, messages[:2], open_turn=False))
        evaluate(llm, prompt_tokens(llm, prompt), watch, keep=len(beginning))
    tool = within if within in tools else None
    if tool is None:
        # An item picked from a list by its place ("the second one") is an object to act on or look at, never
        # small talk.
        picked = PICKED in pointed and naming
        names = list(dict.fromkeys([*(tool["name"] for tool in tools), *([] if picked else [NO_TOOL])]))
        # Scoring every name, rather than letting the model write one, also weighs the ones it would not start with.
        likelihood = log_likelihoods(llm, {name: prompt_tokens(llm, f'{prompt}{name}"') for name in names}, watch)
        score = {name: likelihood[name] + SIMILARITY_WEIGHT * closest.get(name, 0.0) for name in names}
        best, second = sorted(names, key=score.__getitem__, reverse=True)[:2] if len(names) > 1 else (names[0], None)
        logger.debug("decision %s: %s", best, {name: round(value, 2) for name, value in score.items()})
        tool = next((tool for tool in tools if tool["name"] == best), None)
        if tool is None:
            return Decision()
        if second is not None and score[best] - score[second] < MARGIN:
            other = next((candidate for candidate in tools if candidate["name"] == second), None)
            if other is not None:
                return Decision(unsure=(tool, other))
    if not numbered and (unnumbered := needed_numbers(tool)):
        if not about or not about.keys() >= set(unnumbered):
            return Decision(unsaid=(tool, unnumbered[0]))
        page = json.dumps({name: about[name] for name in unnumbered})
    if unsaid := unsaid_choices(request, tool):
        return Decision(unsaid=(tool, unsaid[0]))
    best = tool["name"]
    args, finish_reason = generate(
        llm,
        prompt_tokens(llm, f'{prompt}{best}", "args": '),
        watch,
        max_tokens=DECISION_MAX_TOKENS,
        sampling=DECISION_SAMPLING,
        grammar=arguments_grammar({**tool, "parameters": grounded(tool, request, common, page)}),
    )
    if finish_reason != "stop":  # arguments cut short
        return Decision()
    call = parse_decision(f'{CALL_LEAD}{best}", "args": {args}}}', tools)
    # A call that says nothing (the whole catalogue) answers only a request that speaks of what the tool is about
    # ("List all dashboards"), not a greeting the model took for it ("Hi there, how are you today?").
    if call is not None and not said_args(call, tool) and not speaks_of(request, tool):
        return Decision()
    return Decision(call=call)
