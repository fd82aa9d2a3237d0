"""What the local provider says without letting the model write it, in the person's language (English or Russian).

A 135M model writes fluent sentences about a tool's result that are often false: numbers it never saw, titles from
the examples. So after a call the answer is the tool's own summary of its result (ToolSchema.summarize), or the
result itself; a call that did not run is told as such; when the decision cannot tell two tools apart, it asks; and
it says plainly what it can do when asked what it is, or anything for no tool in Russian, where the model's own
sentences are not readable.
"""

from __future__ import annotations

import json
import logging
import re
from collections import Counter

from django.utils import translation
from django.utils.translation import gettext as _
from django.utils.translation import gettext_noop

from agentchat.sentences import translate
from tools.registry import either

from ..base import ChatMessage, ToolSchema
from .routing import closest_example, language_of, names_its_action

logger = logging.getLogger(__name__)

# A result shown as it is, when its tool has no summary, is cut to this many characters.
SHOWN_RESULT = 1500
# Asked what it is or can do, the model describes a general assistant ("I can offer suggestions, provide
# resources..."): only the demo itself can answer that truthfully.
ABOUT_ITSELF = re.compile(
    r"\bwhat (can|do|could) you (do|help)|\bhow (can|could) you help|\bwho (are|made|built|created) you\b|"
    r"\bwhat are you\b|\byour name\b|\bчто ты (умеешь|можешь)|\bкто ты\b|\bкак тебя зовут|\bчем (ты )?(можешь )?помочь",
    re.IGNORECASE,
)
# "Help" and nothing else: no tool is meant, though a search would take the word.
HELP = re.compile(r"^\W*(help|помощь|помоги(те)?)\W*$", re.IGNORECASE)
# How the question begins when a request could be for either of two tools.
UNSURE = gettext_noop("I am not sure what you would like me to do.")
# How the question begins when a request says what to do but not to which object.
WHICH_ONE = gettext_noop("Which one do you mean?")
# A request about the conversation's files, which the demo model does not read.
ABOUT_FILES = re.compile(
    r"\b(files?|attach\w*|documents?|pdf|csv|xlsx|json|spreadsheets?|sheets?|images?|pictures?|photos?|screenshots?|"
    r"файл\w*|документ\w*|вложени\w*|таблиц\w*|картинк\w*|изображени\w*|фото\w*|скриншот\w*)\b",
    re.IGNORECASE,
)


def last_request(history: list[ChatMessage]) -> str:
    return next((message["content"] for message in reversed(history) if message["role"] == "user"), "")


def latest_results(history: list[ChatMessage]) -> list[ChatMessage]:
    """The tool messages that answer the last assistant turn's calls."""
    results: list[ChatMessage] = []
    for message in reversed(history):
        if message["role"] != "tool":
            break
        results.append(message)
    return list(reversed(results))


def after_calls(history: list[ChatMessage], tools: list[ToolSchema]) -> str:
    """The answer to the latest tool results: each one's summary, in the language of the request."""
    language = language_of(last_request(history))
    by_name = {tool["name"]: tool for tool in tools}
    results = latest_results(history)
    # Of several calls of one tool, a call that did not run is told with its arguments: which one is meant.
    names = Counter(message.get("name") for message in results)
    args = {call["id"]: call["args"] for message in history for call in message.get("tool_calls") or []}
    with translation.override(language):
        return "\n\n".join(
            _result(
                message,
                by_name.get(message.get("name", "")),
                language,
                args.get(message.get("tool_call_id")) if names[message.get("name")] > 1 else None,
            )
            for message in results
        )


def _result(message: ChatMessage, tool: ToolSchema | None, language: str, args: dict | None) -> str:
    name = message.get("name") or "tool"
    content = message["content"]
    outcome = message.get("outcome", "done")
    if outcome != "done":
        # "Error: search_dashboards failed: There is no tag…" is told as "`search_dashboards` did not succeed: There…"
        detail = content.removeprefix("Error: ").removeprefix(f"{name} failed: ")
        return _not_done(outcome, name if args is None else _called(name, args, tool), detail)
    summarize = tool.get("summarize") if tool else None
    if summarize is not None:
        try:
            output = json.loads(content)
        except ValueError:
            output = content
        try:
            return summarize(output, language)
        except Exception:
            logger.warning("the summary of %s failed; its result is shown as it is", name, exc_info=True)
    shown = content if len(content) <= SHOWN_RESULT else content[: SHOWN_RESULT - 1] + "…"
    return _("`%(tool)s` returned:") % {"tool": name} + f"\n\n```\n{shown}\n```"


def _called(name: str, args: dict, tool: ToolSchema | None) -> str:
    """`deploy_dashboard(dashboard_id=4, environment="production")`: the call, as code, its arguments in the
    schema's order (a JSON column on PostgreSQL gives them back in an order of its own)."""
    order = list(tool["parameters"].get("properties", {})) if tool else []
    keys = sorted(args, key=lambda key: (order.index(key) if key in order else len(order), key))
    return f"{name}({', '.join(f'{key}={json.dumps(args[key], ensure_ascii=False)}' for key in keys)})"


def _not_done(outcome: str, name: str, detail: str) -> str:
    words = {
        "rejected": _("You rejected `%(tool)s`, so it did not run."),
        "denied": _("You may not use `%(tool)s`, so it did not run."),
        "unavailable": _("`%(tool)s` is no longer available, so it did not run."),
        "cancelled": _("`%(tool)s` was stopped before it finished."),
        "unknown": _(
            "The server stopped while `%(tool)s` was running, so whether it took effect is not known. "
            "Check before asking again."
        ),
        "invalid": _("`%(tool)s` could not run with those arguments: %(detail)s"),
    }
    sentence = words.get(outcome, _("`%(tool)s` did not succeed: %(detail)s"))
    return sentence % {"tool": name, "detail": translate(detail)}


def _quoted(texts: list[str], language: str) -> list[str]:
    return [f"«{text}»" if language == "ru" else f"“{text}”" for text in texts]


def unsure(request: str, tools: list[ToolSchema]) -> str:
    """A short question, when the request could be for either of two tools, or says a tool's action but was not
    taken for it: an example of each, to say which."""
    language = language_of(request)
    examples = _quoted([found for tool in tools if (found := closest_example(request, tool, language))], language)
    with translation.override(language):
        if not examples:
            return f"{_(UNSURE)} {_('Could you say it in other words?')}"
        if len(examples) == 1:
            return f"{_(UNSURE)} " + _("Did you mean something like %(example)s?") % {"example": examples[0]}
        return f"{_(UNSURE)} " + _("Did you mean something like %(first)s or %(second)s?") % {
            "first": examples[0],
            "second": examples[1],
        }


def acting(request: str, tools: list[ToolSchema]) -> list[ToolSchema]:
    """The tools that act (a deployment, a migration…) whose action the request says: "Run them" is not small
    talk, though the model did not take it for a call."""
    return [tool for tool in tools if tool.get("action_words") and names_its_action(request, tool)]


def asked_what_was_meant(text: str) -> bool:
    """Whether an answer is the question `unsure` asks, or `which_value` for an object's number, in either
    language."""
    return any(text.startswith(_in(language, asked)) for language in ("en", "ru") for asked in (UNSURE, WHICH_ONE))


def _in(language: str, text: str) -> str:
    with translation.override(language):
        return _(text)


def which_value(request: str, tool: ToolSchema, field: str) -> str:
    """The question when a request does not say a value the tool cannot do without: which one (of a fixed set, or
    which object, by its number), with an example of a request that says it."""
    language = language_of(request)
    values = [str(value) for value in tool["parameters"]["properties"][field].get("enum", [])]
    example = closest_example(request, tool, language)
    with translation.override(language):
        if not values:
            text = _(WHICH_ONE)
            if example:
                text += " " + _("Say its number, for example %(example)s.") % {
                    "example": _quoted([example], language)[0]
                }
            return text
        text = _("Which %(field)s do you mean: %(values)s?") % {
            "field": field.replace("_", " "),
            "values": either(values, _),
        }
        if example:
            text += " " + _("You can say it in the request, for example %(example)s.") % {
                "example": _quoted([example], language)[0]
            }
        return text


def no_such_page(request: str, asked: int, pages: int, *, listed: bool = True) -> str:
    """What to say to a request for a page before the first or after the last, or when no list was shown."""
    with translation.override(language_of(request)):
        if not listed:
            return _("There is no list here to turn the page of yet: ask for one first.")
        if asked < 1:
            return _("That was the first page.")
        if pages == 1:
            return _("That was all of them: there is only one page.")
        return _("That was the last page: there are %(pages)d.") % {"pages": pages}


def not_in_a_list(request: str) -> str:
    """What to say to a request that picks an item by its place ("the first one") when no list shown has it."""
    with translation.override(language_of(request)):
        return _("No list shown here has that one: ask for a list first, or say its number.")


def not_permitted(request: str, tools: list[ToolSchema], withheld: list[ToolSchema]) -> str:
    """What to say when the request asks for the action of a tool the user may not use, and of none they may; or
    "". Else the best of the tools they may use would answer, a health check for "Deploy dashboard 9"."""

    def asked(tool: ToolSchema) -> bool:
        return bool(tool.get("action_words")) and names_its_action(request, tool)

    refused = [tool for tool in withheld if asked(tool)]
    if not refused or any(asked(tool) for tool in tools):
        return ""
    with translation.override(language_of(request)):
        return _(
            "You may not use %(tool)s: your account does not have the permission for it. An administrator can give "
            "it to you."
        ) % {"tool": f"`{refused[0]['name']}`"}


def asks_about_itself(request: str) -> bool:
    return bool(ABOUT_ITSELF.search(request)) or asks_for_help(request)


def asks_for_help(request: str) -> bool:
    return bool(HELP.match(request))


def asks_about_files(request: str) -> bool:
    return bool(ABOUT_FILES.search(request))


def what_it_can_do(request: str, tools: list[ToolSchema], *, files: bool = False) -> str:
    """What the demo model is and can do, in the request's language, with examples of requests it serves; with
    `files`, that it does not read them."""
    language = language_of(request)
    examples = _quoted([found for tool in tools if (found := closest_example(request, tool, language))][:3], language)
    with translation.override(language):
        if files:
            text = _(
                "I am the demo model that runs on this server: I cannot read attached files. A full model can, "
                "once an administrator connects one (LLM_PROVIDER=openai-compatible)."
            )
        else:
            text = _(
                "I am the demo model that runs on this server: I can only work with the tools, not hold a "
                "conversation. An administrator can connect a full model (LLM_PROVIDER=openai-compatible)."
            )
        if examples:
            text += " " + _("Try, for example: %(examples)s.") % {"examples": ", ".join(examples)}
        return text
