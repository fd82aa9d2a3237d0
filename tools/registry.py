"""Tools the agent can call: a function, a pydantic model of its arguments, and a few flags.

@tool(permission="dashboards.deploy", requires_confirmation=True,
      examples=[("Deploy dashboard 3 to staging", {"dashboard_id": 3, "environment": "staging"})])
def deploy_dashboard(args: DeployArgs, ctx: ToolContext) -> dict:
    \"\"\"Deploy a dashboard to an environment.\"\"\"
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import threading
import typing
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from asgiref.sync import sync_to_async
from django.db import close_old_connections
from pydantic import BaseModel, ValidationError

from agentchat.agent.providers import ToolSchema
from agentchat.agent.providers.base import ToolExample

logger = logging.getLogger(__name__)

DEFAULT_TIMEOUT = 30.0
# A tool allowed to take longer than this runs as a background job, as does one declared `slow`.
BACKGROUND_AFTER = 30.0


@dataclass
class ToolContext:
    """What a tool may know about the call: who asks, where, and what the page shows."""

    user: Any
    conversation_id: str | None = None
    page_context: dict[str, Any] = field(default_factory=dict)
    attachments: list[Any] = field(default_factory=list)


class ToolArgumentsError(ValueError):
    """Arguments that do not fit the tool's model; the message names every offending field."""


class ToolTimeout(TimeoutError):
    pass


def _describe(error: ValidationError) -> str:
    problems = []
    for item in error.errors(include_url=False):
        where = ".".join(str(part) for part in item["loc"]) or "arguments"
        problems.append(f"{where}: {item['msg']}")
    return "; ".join(problems)


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

    def schema(self) -> ToolSchema:
        parameters = self.args_model.model_json_schema()
        parameters.pop("title", None)
        schema: ToolSchema = {"name": self.name, "description": self.description, "parameters": parameters}
        if self.examples:
            schema["examples"] = [ToolExample(request=request, args=dict(args)) for request, args in self.examples]
        return schema

    @property
    def in_background(self) -> bool:
        return self.slow or self.timeout > BACKGROUND_AFTER

    def permitted(self, user) -> bool:
        return self.permission is None or (user is not None and user.has_perm(self.permission))

    def validate(self, args: Any) -> BaseModel:
        if not isinstance(args, dict):
            raise ToolArgumentsError(f"Invalid arguments for {self.name}: expected a JSON object.")
        try:
            return self.args_model.model_validate(args)
        except ValidationError as exc:
            raise ToolArgumentsError(f"Invalid arguments for {self.name}: {_describe(exc)}") from None

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

    def register(self, tool: Tool) -> Tool:
        if tool.name in self._tools:
            raise ValueError(f"A tool named {tool.name!r} is registered already.")
        self._tools[tool.name] = tool
        return tool

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
                    except ValueError:
                        logger.exception("a tool of %r was not registered", load)

    def get(self, name: str) -> Tool:
        self._load_sources()
        return self._tools[name]

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

    def to_tool_schemas(self, user=None) -> list[ToolSchema]:
        """Provider-agnostic schemas; with a user, only the tools that user is permitted."""
        tools = self.all() if user is None else self.permitted(user)
        return [tool.schema() for tool in tools]

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
    ):
        """Register `func(args: Model, ctx: ToolContext)`; its docstring is the description the model reads.

        A `slow` tool, or one whose `timeout` is over BACKGROUND_AFTER, runs as a background job in the worker.

        `examples` are typical requests with their arguments (checked against the model here); small models
        are shown the ones most like what the user asked.
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
            for request, args in examples:
                try:
                    args_model.model_validate(args)
                except ValidationError as exc:
                    problems = _describe(exc)
                    raise TypeError(f"{func.__name__}: example {request!r} has bad arguments: {problems}") from None
            return self.register(
                Tool(
                    name=name or func.__name__,
                    description=description,
                    args_model=args_model,
                    func=func,
                    requires_confirmation=requires_confirmation,
                    permission=permission,
                    timeout=timeout,
                    slow=slow,
                    examples=examples,
                )
            )

        return decorate(func) if func is not None else decorate


registry = ToolRegistry()
tool = registry.tool
