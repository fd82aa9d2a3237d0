"""One tool call, carried out one way for the agent loop, for decided confirmations and for the background worker.

The steps, in order: look the tool up, check that the user (as stored now) may use it, validate the arguments
strictly, stop at the confirmation gate unless the call is already decided, run it with the tool's timeout, and
say how it went as a typed outcome. What the gate shows and what runs are the same normalised arguments.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from asgiref.sync import sync_to_async
from pydantic import BaseModel

from agentchat.text import storable
from tools.registry import Tool, ToolArgumentsError, ToolContext, ToolRegistry, ToolTimeout


class Outcome(StrEnum):
    DONE = "done"
    ERROR = "error"  # the tool raised or timed out
    INVALID = "invalid"  # the arguments do not fit the tool's contract; the tool did not run
    REJECTED = "rejected"  # its owner said no
    DENIED = "denied"  # the user may not use the tool (now)
    UNAVAILABLE = "unavailable"  # no such tool any more
    CANCELLED = "cancelled"  # stopped, or never started because the answer was interrupted
    UNKNOWN = "unknown"  # the server stopped while it ran: it may or may not have taken effect


@dataclass(frozen=True)
class ToolOutcome:
    outcome: Outcome
    output: Any = None
    error: str = ""

    @property
    def ok(self) -> bool:
        return self.outcome == Outcome.DONE

    @property
    def content(self) -> str:
        """The tool message the model reads next round (and that is stored): a service's answer, or an error that
        quotes one, may hold what no database stores."""
        if not self.ok:
            return storable(f"Error: {self.error}")
        if isinstance(self.output, str):
            return storable(self.output)
        return storable(json.dumps(self.output, ensure_ascii=False, default=str))

    @classmethod
    def done(cls, output: Any) -> ToolOutcome:
        return cls(Outcome.DONE, output=output)

    @classmethod
    def failed(cls, error: str) -> ToolOutcome:
        return cls(Outcome.ERROR, error=error)

    @classmethod
    def rejected(cls, reason: str = "") -> ToolOutcome:
        return cls(Outcome.REJECTED, error="rejected by the user." + (f" Reason: {reason}" if reason else ""))

    @classmethod
    def denied(cls, name: str) -> ToolOutcome:
        return cls(Outcome.DENIED, error=f"permission denied: you may not use {name}.")

    @classmethod
    def unavailable(cls, name: str) -> ToolOutcome:
        return cls(Outcome.UNAVAILABLE, error=f"{name} is no longer available.")

    @classmethod
    def cancelled(cls, why: str) -> ToolOutcome:
        return cls(Outcome.CANCELLED, error=why)

    @classmethod
    def unknown(cls, name: str) -> ToolOutcome:
        return cls(
            Outcome.UNKNOWN,
            error=f"the server stopped while {name} was running, so whether it took effect is not known. "
            "Check before trying it again.",
        )


@dataclass(frozen=True)
class Started:
    """The call passed every check and runs now, with these (normalised) arguments."""

    tool: Tool
    args: dict[str, Any]


@dataclass(frozen=True)
class NeedsConfirmation:
    """The call passed every check and waits for its owner to decide on these (normalised) arguments."""

    tool: Tool
    args: dict[str, Any]


# How a checked call is run: call_tool here and now, or (in the run layer) a slow tool as a background job.
Execute = Callable[[Tool, BaseModel, str], Awaitable[ToolOutcome]]


@dataclass(frozen=True)
class ToolAccess:
    """What carrying out a call needs from its caller: the tools, the user's rights as stored now, a way to run."""

    lookup: Callable[[str], Tool | None]
    permitted: Callable[[Tool], Awaitable[bool]]
    execute: Execute

    @classmethod
    def direct(cls, registry: ToolRegistry, ctx: ToolContext) -> ToolAccess:
        """Every call run here and now with `ctx`, its user's permissions read as the call comes."""

        async def execute(tool: Tool, args: BaseModel, call_id: str) -> ToolOutcome:
            return await call_tool(tool, args, ctx)

        return cls(
            lookup=registry.find, permitted=sync_to_async(lambda tool: tool.permitted(ctx.user)), execute=execute
        )


async def call_tool(tool: Tool, args: BaseModel, ctx: ToolContext) -> ToolOutcome:
    """Run one checked call; whatever the tool raises becomes a failed outcome, never a crash."""
    try:
        output = await tool.run(args, ctx)
    except ToolTimeout as exc:
        return ToolOutcome.failed(str(exc))
    except Exception as exc:
        return ToolOutcome.failed(f"{tool.name} failed: {exc}" if str(exc) else f"{tool.name} failed.")
    return ToolOutcome.done(output)


async def carry_out(
    access: ToolAccess, call_id: str, name: str, raw_args: Any, *, decided: bool = False
) -> AsyncIterator[Started | NeedsConfirmation | ToolOutcome]:
    """The steps of one call; the last item is always its ToolOutcome, unless it stops at the gate.

    `decided`: the owner approved these arguments (or the call is past the gate already, as in the worker).
    """
    tool = access.lookup(name)
    if tool is None:
        yield ToolOutcome.unavailable(name)
        return
    if not await access.permitted(tool):
        yield ToolOutcome.denied(name)
        return
    try:
        args = tool.validate(raw_args)
    except ToolArgumentsError as exc:
        yield ToolOutcome(Outcome.INVALID, error=str(exc))
        return
    normalised = tool.normalise(args)
    if tool.requires_confirmation and not decided:
        yield NeedsConfirmation(tool, normalised)
        return
    yield Started(tool, normalised)
    yield await access.execute(tool, args, call_id)


async def carry_out_decided(access: ToolAccess, call_id: str, name: str, raw_args: Any) -> ToolOutcome:
    """A call past the gate, taken to its outcome without showing its steps (the background worker's way)."""
    async for step in carry_out(access, call_id, name, raw_args, decided=True):
        last = step
    return last


def with_every_result(history: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The history with every assistant tool call followed by its tool message, as providers require.

    The run layer stores a result for every call; this is the last line of defence should one be missing:
    the model is told that no result was recorded, and a result with no call before it is left out.
    """
    fixed: list[dict[str, Any]] = []
    open_calls: dict[str, str] = {}

    def close_open() -> None:
        for call_id, name in open_calls.items():
            fixed.append(
                {
                    "role": "tool",
                    "tool_call_id": call_id,
                    "name": name,
                    "content": "Error: no result was recorded.",
                    "outcome": Outcome.UNKNOWN,
                }
            )
        open_calls.clear()

    for message in history:
        if message["role"] == "tool":
            if open_calls.pop(message.get("tool_call_id"), None) is not None:
                fixed.append(message)
            continue
        close_open()
        fixed.append(message)
        for call in message.get("tool_calls") or []:
            open_calls[call["id"]] = call["name"]
    close_open()
    return fixed
