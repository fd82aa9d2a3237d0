"""Which tool, if any, a request calls for, decided the same way every time:

1. the two tool examples most like the request (tools may declare typical requests with their arguments; likeness
   is shared letter trigrams, so any language) are shown as earlier turns answered with JSON
   {"tool": <name>, "args": {...}}; a small-talk example answered {"tool": "none"} takes the place of the farther
   one when the request is more like small talk than like any tool;
2. the model's log-likelihood of writing each offered tool's name, or "none", after `{"tool": "` is measured, and
   SIMILARITY_WEIGHT times the request's likeness to that tool (its examples, or its description's first
   paragraph) is added; the highest wins;
3. the arguments are then generated at temperature 0 under a grammar made from that tool's schema.

The figures below were measured with evals/test_local_routing_eval.py on its two tuning sets (34 requests).
"""

from __future__ import annotations

import json
import logging
import math
import re
import secrets
from collections import Counter
from typing import TYPE_CHECKING, Any

from ..base import ToolCall, ToolSchema
from .chatml import chat_prompt, prompt_tokens
from .llama import DECISION_SAMPLING, arguments_grammar, generate, log_likelihoods
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
# The no-tool side of the examples: small talk and general questions, in English and Russian. Nothing here is
# about any one toolset.
NO_TOOL_EXAMPLES = (
    "Hello!",
    "Good morning",
    "Thanks!",
    "What can you do?",
    "Tell me something interesting",
    "Explain what an API is",
    "Привет!",
    "Добрый день!",
    "Спасибо!",
    "Что ты умеешь?",
    "Расскажи анекдот",
    "Объясни, что такое API",
)
NO_TOOL = "none"
WORD = re.compile(r"\w+")
CALL_LEAD = '{"tool": "'


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
    return ToolCall(id=f"call_{secrets.token_hex(12)}", name=decision["tool"], args=decision["args"])


def decide(
    llm: Llama, system_prompt: str, history: list[dict[str, str]], tools: list[ToolSchema], watch: Watch
) -> ToolCall | None:
    """The tool to call and its arguments, or None to answer in words (module docstring)."""
    shown, closest = choose_examples(history[-1]["content"], tools)
    prompt = chat_prompt(llm, decision_messages(system_prompt, history, tools, shown)) + CALL_LEAD
    names = list(dict.fromkeys([*(tool["name"] for tool in tools), NO_TOOL]))
    # Scoring every name, rather than letting the model write one, also weighs the ones it would not start with.
    likelihood = log_likelihoods(llm, {name: prompt_tokens(llm, f'{prompt}{name}"') for name in names}, watch)
    best = max(names, key=lambda name: likelihood[name] + SIMILARITY_WEIGHT * closest.get(name, 0.0))
    logger.debug("decision %s: %s", best, {name: round(likelihood[name], 2) for name in names})
    tool = next((tool for tool in tools if tool["name"] == best), None)
    if tool is None:
        return None
    args, finish_reason = generate(
        llm,
        prompt_tokens(llm, f'{prompt}{best}", "args": '),
        watch,
        max_tokens=DECISION_MAX_TOKENS,
        sampling=DECISION_SAMPLING,
        grammar=arguments_grammar(tool),
    )
    if finish_reason != "stop":  # arguments cut short
        return None
    return parse_decision(f'{CALL_LEAD}{best}", "args": {args}}}', tools)
