"""Tools the agent can call: a function, a pydantic model of its arguments, and a few flags.

class DeployArgs(ToolArgs):
    dashboard_id: int
    environment: Literal["staging", "production"]

@tool(permission="dashboards.deploy", requires_confirmation=True,
      examples=[("Deploy dashboard 3 to staging", {"dashboard_id": 3, "environment": "staging"})])
def deploy_dashboard(args: DeployArgs, ctx: ToolContext) -> dict:
    \"\"\"Deploy a dashboard to an environment.\"\"\"
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import json
import logging
import threading
import types
import typing
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from enum import Enum
from typing import Any, NotRequired, TypedDict

from asgiref.sync import sync_to_async
from django.db import close_old_connections
from pydantic import BaseModel, ConfigDict, ValidationError

from agentchat.sentences import gettext_noop

from .files import Files

logger = logging.getLogger(__name__)

DEFAULT_TIMEOUT = 30.0
# A tool allowed to take longer than this runs as a background job, as does one declared `slow`.
BACKGROUND_AFTER = 30.0


class ToolExample(TypedDict):
    """A typical request for a tool and the arguments it should be called with."""

    request: str
    args: dict[str, Any]


# How a tool says in a person's language ("en" or "ru") what its output means: (output, language) -> text.
Summary = Callable[[Any, str], str]


class ToolSchema(TypedDict):
    """A tool as every provider is told about it: `parameters` is a JSON Schema object.

    The rest is for small models, and the openai-compatible provider leaves it out (large models do not need it,
    and it would cost tokens on every request): `examples`, which the local provider shows as earlier turns;
    `action_words`, for a tool that acts (every tool that waits for the user's approval does), the words of which
    one must be in a request, and not as a question, before the local model may call it; `choice_words`, for an
    argument with a fixed set of values, the words that name each value in a request ({"environment":
    {"production": ["prod", "прод"]}}; a yes/no argument's under "true" and "false"): an optional one whose
    words a request does not say, the local model leaves out; `cue_words`, for an optional free argument whose
    values are not the request's own words, the words of which one must be in a request before the local model
    may fill it ({"tag": ["\\btag", "\\bтег"]}: "dashboards about sales" searches for the words, it names no
    tag), and a tool that declares them never has the request's own words left out (they go to the argument
    they cue, or else to its first free one); a cue with a `value` group says where the value is, and the text
    it captures is the value ("with message (?P<value>.+)"); `summarize`, which tells what a result means, so
    that the local model's answer repeats only what the tool returned.
    """

    name: str
    description: str
    parameters: dict[str, Any]
    examples: NotRequired[list[ToolExample]]
    action_words: NotRequired[list[str]]
    choice_words: NotRequired[dict[str, dict[str, list[str]]]]
    cue_words: NotRequired[dict[str, list[str]]]
    summarize: NotRequired[Summary]


@dataclass
class ToolContext:
    """What a tool may know about the call: who asks, where, and what the page shows."""

    user: Any
    conversation_id: str | None = None
    page_context: dict[str, Any] = field(default_factory=dict)
    files: Files | None = None


def as_written(text: str) -> str:
    """The words of a refusal as the model reads them: in English."""
    return text


class ToolArgumentsError(ValueError):
    """Arguments that do not fit the tool's model; `problems` names every offending field."""

    def __init__(self, tool_name: str, problems: str, say: Callable[[str], str] = as_written):
        super().__init__(say(WORDS["invalid"]) % {"tool": tool_name, "problems": problems})
        self.problems = problems


class ToolTimeout(TimeoutError):
    pass


class ToolArgs(BaseModel):
    """The base of a tool's arguments: a key the model is not told about is refused, never silently dropped."""

    model_config = ConfigDict(extra="forbid")


# What a value of each type should have been, for the type errors of strict validation.
EXPECTED = {
    "int_type": gettext_noop("a whole number"),
    "float_type": gettext_noop("a number"),
    "string_type": gettext_noop("a string"),
    "bool_type": gettext_noop("true or false"),
    "list_type": gettext_noop("a list"),
    "dict_type": gettext_noop("an object"),
    "model_type": gettext_noop("an object"),
}
# The other words of a refusal. The model reads them as they are; a person who edits a call's arguments reads them
# said by `say` (gettext) in their own language.
WORDS = {
    "invalid": gettext_noop("Invalid arguments for %(tool)s: %(problems)s"),
    "object": gettext_noop("expected a JSON object."),
    "plain": gettext_noop("expected plain JSON values (no NaN or Infinity)."),
    "or": gettext_noop("%(first)s or %(last)s"),
    "one_of": gettext_noop("one of %(choices)s"),
    "must_be": gettext_noop("must be %(allowed)s, not %(got)s"),
    "expected": gettext_noop("expected %(expected)s, got %(got)s"),
    "unknown_argument": gettext_noop("unknown argument"),
    "unknown_key": gettext_noop("unknown key"),
    "known": gettext_noop("%(what)s (known: %(keys)s)"),
    "none": gettext_noop("none"),
    "missing": gettext_noop("required, but missing"),
    "arguments": gettext_noop("arguments"),
}
SHOWN_CHARS = 60


def _forbids_extra(model: Any) -> bool:
    return isinstance(model, type) and issubclass(model, BaseModel) and model.model_config.get("extra") == "forbid"


def _shown(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=False)
    return text if len(text) <= SHOWN_CHARS else text[: SHOWN_CHARS - 1] + "…"


def either(choices: list[str], say: Callable[[str], str]) -> str:
    """ "a, b or c", in the words `say` gives."""
    return (
        choices[0] if len(choices) == 1 else say(WORDS["or"]) % {"first": ", ".join(choices[:-1]), "last": choices[-1]}
    )


def _model_in(annotation: Any) -> type[BaseModel] | None:
    """The model inside an annotation such as `list[Filter] | None`, if there is one."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    return next(filter(None, map(_model_in, typing.get_args(annotation))), None)


def _keys(model: type[BaseModel] | None) -> dict[str, Any]:
    """A model's fields by the key the caller uses: the alias when there is one."""
    return {info.alias or name: info for name, info in model.model_fields.items()} if model else {}


def _annotation_at(model: type[BaseModel], path: tuple[int | str, ...]) -> Any:
    """The annotation of the value at `path`, when the models' annotations tell it; None otherwise."""
    annotation: Any = model
    for part in path:
        if isinstance(part, int):
            continue
        field = _keys(_model_in(annotation)).get(part)
        if field is None:
            return None
        annotation = field.annotation
    return annotation


def _known(model: type[BaseModel], parent: tuple[int | str, ...]) -> list[str] | None:
    """The keys the object at `parent` may have, when its model can be told from the annotations."""
    found = _model_in(_annotation_at(model, parent))
    return list(_keys(found)) if found else None


def _choices(annotation: Any) -> list[Any] | None:
    """The values a field of a fixed set (a Literal or an Enum, maybe optional) may take; None for another field."""
    if typing.get_origin(annotation) is typing.Literal:
        return list(typing.get_args(annotation))
    if isinstance(annotation, type) and issubclass(annotation, Enum):
        return [member.value for member in annotation]
    if typing.get_origin(annotation) is typing.Annotated:
        return _choices(typing.get_args(annotation)[0])
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        return next(filter(None, map(_choices, typing.get_args(annotation))), None)
    return None


def _where(data: Any, loc: tuple[int | str, ...], *, absent_last: bool) -> tuple[int | str, ...]:
    """`loc` without the tags pydantic puts after a union's name for each of its members (`value.str`).

    What is not a key of the arguments is such a tag, except a missing field's own name.
    """
    kept: list[int | str] = []
    for number, part in enumerate(loc):
        if (isinstance(data, dict) and part in data) or (
            isinstance(data, list) and isinstance(part, int) and part < len(data)
        ):
            kept.append(part)
            data = data[part]
        elif absent_last and number == len(loc) - 1:
            kept.append(part)
    return tuple(kept)


def _describe(error: ValidationError, model: type[BaseModel], data: Any, say: Callable[[str], str]) -> str:
    """Every offending field with what was wrong; a union's refusals of one value become one sentence."""
    expected: dict[tuple[int | str, ...], list[str]] = {}
    got: dict[tuple[int | str, ...], Any] = {}
    said: dict[tuple[int | str, ...], list[str]] = {}
    one_of: dict[tuple[int | str, ...], list[Any]] = {}
    for item in error.errors(include_url=False):
        kind = item["type"]
        where = _where(data, item["loc"], absent_last=kind == "missing")
        said.setdefault(where, [])
        # A value outside a fixed set is told the set, whatever refused it (the type, the Literal, a validator).
        if kind != "missing" and (choices := _choices(_annotation_at(model, where))):
            one_of[where] = choices
            got[where] = item["input"]
        elif kind in EXPECTED or kind == "literal_error":
            expected.setdefault(where, []).append(say(EXPECTED[kind]) if kind in EXPECTED else item["ctx"]["expected"])
            got[where] = item["input"]
        elif kind == "extra_forbidden":
            known = _known(model, where[:-1])
            what = say(WORDS["unknown_argument"] if len(where) == 1 else WORDS["unknown_key"])
            if known is not None:
                what = say(WORDS["known"]) % {"what": what, "keys": ", ".join(known) or say(WORDS["none"])}
            said[where].append(what)
        elif kind == "missing":
            said[where].append(say(WORDS["missing"]))
        else:
            said[where].append(item["msg"].removeprefix("Value error, "))
    problems = []
    for where, texts in said.items():
        if where in one_of:
            shown = [choice if isinstance(choice, str) else json.dumps(choice) for choice in one_of[where]]
            allowed = say(WORDS["one_of"]) % {"choices": ", ".join(shown)} if len(shown) > 1 else shown[0]
            texts = [say(WORDS["must_be"]) % {"allowed": allowed, "got": _shown(got[where])}, *texts]
        elif where in expected:
            wanted = either(expected[where], say)
            texts = [say(WORDS["expected"]) % {"expected": wanted, "got": _shown(got[where])}, *texts]
        problems.append(f"{'.'.join(map(str, where)) or say(WORDS['arguments'])}: {'; '.join(texts)}")
    return "; ".join(problems)


def _unsaid(value: Any) -> dict[Any, Any]:
    """`model_dump`'s `exclude` for the fields that say nothing: None, where None is the default too."""
    if isinstance(value, BaseModel):
        found: dict[Any, Any] = {}
        for name, info in type(value).model_fields.items():
            item = getattr(value, name)
            inner = True if item is None and info.default is None else _unsaid(item)
            if inner:
                found[name] = inner
        return found
    if isinstance(value, list | dict):
        items = value.items() if isinstance(value, dict) else enumerate(value)
        return {key: inner for key, item in items if (inner := _unsaid(item))}
    return {}


@dataclass(frozen=True)
class ToolSource:
    """Where a tool comes from: `kind` "http" (a REST service) or "mcp" (an MCP server), and that one's name."""

    kind: str
    name: str


def _call_sync(func: Callable, args: BaseModel, ctx: ToolContext) -> Any:
    # A worker thread of its own, so a slow tool never holds up the process's other database work.
    close_old_connections()
    try:
        return func(args, ctx)
    finally:
        close_old_connections()


@dataclass(frozen=True)
class Tool:
    name: str
    description: str
    args_model: type[BaseModel]
    func: Callable[[BaseModel, ToolContext], Any]
    requires_confirmation: bool = False
    permission: str | None = None
    timeout: float = DEFAULT_TIMEOUT
    slow: bool = False
    # Typical requests with the arguments they call for, e.g. ("Deploy dashboard 3 to staging", {...}); left out of
    # comparisons and the hash (the arguments are dicts), so a Tool stays hashable.
    examples: tuple[tuple[str, dict[str, Any]], ...] = field(default=(), compare=False)
    # Regular expressions, any one of which a request must match before a small model may call the tool; for a
    # tool that waits for approval and declares none, the first word of its name (deploy_dashboard: "deploy").
    action_words: tuple[str, ...] = ()
    choice_words: dict[str, dict[str, list[str]]] = field(default_factory=dict, compare=False)
    cue_words: dict[str, list[str]] = field(default_factory=dict, compare=False)
    summarize: Summary | None = field(default=None, compare=False)
    # None for a tool written in this code base (its app is where its function is).
    source: ToolSource | None = None

    def schema(self) -> ToolSchema:
        """What a provider is told of the tool: built once (pydantic takes about a millisecond a model), the same
        object every time, so nobody may change it."""
        return self._schema

    @functools.cached_property
    def _schema(self) -> ToolSchema:
        parameters = self.args_model.model_json_schema()
        parameters.pop("title", None)
        schema: ToolSchema = {"name": self.name, "description": self.description, "parameters": parameters}
        if self.examples:
            schema["examples"] = [ToolExample(request=request, args=dict(args)) for request, args in self.examples]
        if self.action_words or self.requires_confirmation:
            verb = self.name.split("__")[-1].split("_")[0]
            schema["action_words"] = list(self.action_words) or [rf"\b{verb}"]
        if self.choice_words:
            schema["choice_words"] = self.choice_words
        if self.cue_words:
            schema["cue_words"] = self.cue_words
        if self.summarize is not None:
            schema["summarize"] = self.summarize
        return schema

    @property
    def in_background(self) -> bool:
        return self.slow or self.timeout > BACKGROUND_AFTER

    def permitted(self, user) -> bool:
        return self.permission is None or (user is not None and user.has_perm(self.permission))

    def validate(self, raw: Any, say: Callable[[str], str] = as_written) -> BaseModel:
        """The arguments as the tool's model, strictly: a value of the wrong type is refused, not converted.

        A refusal (ToolArgumentsError) is in English; `say` puts its words in a person's language.
        """
        # As JSON, which is what arguments are. Both strict modes refuse true, 42.0 and "42" for an int and 42 for
        # a str, and take 1 for a float; Python mode would also ask for what JSON cannot carry (a list, not a tuple;
        # enum members, datetimes), where JSON mode takes their JSON forms. Neither makes a Literal strict: it
        # matches by equality, so Literal[1] takes true (the OpenAPI enums check the type themselves).
        if not isinstance(raw, dict):
            raise ToolArgumentsError(self.name, say(WORDS["object"]), say)
        try:
            text = json.dumps(raw, allow_nan=False)
        except (TypeError, ValueError):
            raise ToolArgumentsError(self.name, say(WORDS["plain"]), say) from None
        try:
            return self.args_model.model_validate_json(text, strict=True)
        except ValidationError as exc:
            problems = _describe(exc, self.args_model, json.loads(text), say)
            raise ToolArgumentsError(self.name, problems, say) from None

    def normalise(self, valid: BaseModel) -> dict[str, Any]:
        """The one JSON form of validated arguments, for the approval card, the confirmation, the audit and the call.

        Every field is in it, defaults too (a person sees that a commit goes to "main"), but for one that is None
        by default and still None: it says nothing. `validate` gives back the same arguments from it.
        """
        return valid.model_dump(mode="json", by_alias=True, exclude=_unsaid(valid))

    async def run(self, args: BaseModel, ctx: ToolContext) -> Any:
        """Run with the tool's timeout. A sync tool runs in a worker thread, which a timeout abandons."""
        if inspect.iscoroutinefunction(self.func):
            call = self.func(args, ctx)
        else:
            call = sync_to_async(_call_sync, thread_sensitive=False)(self.func, args, ctx)
        try:
            return await asyncio.wait_for(call, timeout=self.timeout)
        except TimeoutError:
            raise ToolTimeout(f"{self.name} did not finish within {self.timeout:g} s.") from None


class ToolRegistry:
    def __init__(self) -> None:
        self._tools: dict[str, Tool] = {}
        self._sources: list[Callable[[], Iterable[Tool] | None]] = []
        self._sources_lock = threading.Lock()
        # Writers replace the dict rather than change it, so a reader iterating it meanwhile is never disturbed.
        self._write_lock = threading.Lock()

    @staticmethod
    def _admit(tool: Tool, tools: dict[str, Tool]) -> None:
        if not _forbids_extra(tool.args_model):
            raise TypeError(
                f"{tool.name}: the arguments model must be a pydantic model that forbids unknown keys "
                "(derive it from ToolArgs)."
            )
        if tool.name in tools:
            raise ValueError(f"A tool named {tool.name!r} is registered already.")

    def register(self, tool: Tool) -> Tool:
        with self._write_lock:
            self._admit(tool, self._tools)
            self._tools = {**self._tools, tool.name: tool}
        return tool

    def replace(self, names: Iterable[str], tools: Iterable[Tool]) -> dict[str, str]:
        """Swap the tools called `names` for `tools` at once: a toolset whose tools change while the process runs.

        A tool that cannot be registered (see `register`) is left out: the reasons are returned by tool name.
        """
        refused: dict[str, str] = {}
        with self._write_lock:
            gone = set(names)
            kept = {name: tool for name, tool in self._tools.items() if name not in gone}
            for tool in tools:
                try:
                    self._admit(tool, kept)
                except (TypeError, ValueError) as exc:
                    refused[tool.name] = str(exc)
                    continue
                kept[tool.name] = tool
            self._tools = kept
        return refused

    def add_source(self, load: Callable[[], Iterable[Tool] | None]) -> None:
        """Tools known only later (e.g. an OpenAPI document behind a URL), loaded at the first lookup.

        A source that returns None (not available yet) or raises is asked again at a later lookup, and
        that lookup waits for it: sources bound their own waits and space out their retries.
        """
        with self._sources_lock:
            self._sources.append(load)

    def _load_sources(self) -> None:
        if not self._sources:
            return
        with self._sources_lock:
            for load in list(self._sources):
                try:
                    tools = load()
                except Exception:
                    logger.exception("could not load the tools of %r; trying again at the next lookup", load)
                    continue
                if tools is None:
                    continue
                self._sources.remove(load)
                for tool in tools:
                    try:
                        self.register(tool)
                    except (TypeError, ValueError):
                        logger.exception("a tool of %r was not registered", load)

    def get(self, name: str) -> Tool:
        self._load_sources()
        return self._tools[name]

    def find(self, name: str) -> Tool | None:
        self._load_sources()
        return self._tools.get(name)

    def has(self, name: str) -> bool:
        self._load_sources()
        return name in self._tools

    def all(self) -> list[Tool]:
        self._load_sources()
        return list(self._tools.values())

    def permitted(self, user) -> list[Tool]:
        """The tools `user` may see and call. Checks permissions, so call it from sync code."""
        self._load_sources()
        return [tool for tool in self._tools.values() if tool.permitted(user)]

    def withheld(self, offered: Iterable[Tool]) -> list[Tool]:
        """The tools not among `offered` (a user's permitted ones): those the user may not use."""
        names = {tool.name for tool in offered}
        return [tool for tool in self.all() if tool.name not in names]

    def tool(
        self,
        func: Callable | None = None,
        *,
        name: str | None = None,
        requires_confirmation: bool = False,
        permission: str | None = None,
        timeout: float = DEFAULT_TIMEOUT,
        slow: bool = False,
        examples: Iterable[tuple[str, dict[str, Any]]] = (),
        action_words: Iterable[str] = (),
        choice_words: dict[str, dict[str, list[str]]] | None = None,
        cue_words: dict[str, list[str]] | None = None,
        summarize: Summary | None = None,
    ):
        """Register `func(args: Model, ctx: ToolContext)`; its docstring is the description the model reads.

        A `slow` tool, or one whose `timeout` is over BACKGROUND_AFTER, runs as a background job in the worker.

        `examples` are typical requests with their arguments (checked against the model here); small models
        are shown the ones most like what the user asked. `action_words`, `choice_words`, `cue_words` and
        `summarize`: see ToolSchema.
        """
        examples = tuple((request, dict(args)) for request, args in examples)

        def decorate(func: Callable) -> Tool:
            first = next(iter(inspect.signature(func).parameters), None)
            args_model = typing.get_type_hints(func).get(first) if first else None
            if not (isinstance(args_model, type) and issubclass(args_model, BaseModel)):
                raise TypeError(f"{func.__name__}: the first parameter must be annotated with a pydantic model.")
            description = inspect.cleandoc(func.__doc__ or "")
            if not description:
                raise TypeError(f"{func.__name__}: the docstring is the tool's description, and it is missing.")
            tool = Tool(
                name=name or func.__name__,
                description=description,
                args_model=args_model,
                func=func,
                requires_confirmation=requires_confirmation,
                permission=permission,
                timeout=timeout,
                slow=slow,
                examples=examples,
                action_words=tuple(action_words),
                choice_words=dict(choice_words or {}),
                cue_words=dict(cue_words or {}),
                summarize=summarize,
            )
            for request, args in examples:
                try:
                    tool.validate(args)
                except ToolArgumentsError as exc:
                    raise TypeError(f"{func.__name__}: example {request!r} has bad arguments: {exc.problems}") from None
            return self.register(tool)

        return decorate(func) if func is not None else decorate


registry = ToolRegistry()
tool = registry.tool
