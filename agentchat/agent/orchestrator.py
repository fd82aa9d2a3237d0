"""One run of the agent: rounds of provider → validate → (confirm) → execute, yielded as events (SPEC §6).

The engine is plain async Python. It is handed the history, the tools this user may use and the
provider, and yields events; storing them, fanning them out and cancelling are the caller's work.
Resuming after a confirmation is running again on a history that holds the decision's tool message.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import aclosing
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel

from tools.registry import Tool, ToolArgumentsError, ToolContext, ToolRegistry, ToolTimeout

from .events import (
    AssistantMessage,
    ConfirmRequired,
    RoundRetry,
    RunEvent,
    RunFinished,
    Token,
    ToolEnd,
    ToolError,
    ToolStart,
)
from .providers import ChatMessage, Provider, ProviderChatParams, ProviderChatResponse, ProviderError, TextDelta

LIMIT_MESSAGE = "Reached maximum iteration limit"


@dataclass(frozen=True)
class ToolOutcome:
    ok: bool
    output: Any = None
    error: str = ""
    reason: str = "failed"

    @classmethod
    def denied(cls, name: str) -> ToolOutcome:
        return cls(ok=False, error=f"permission denied: you may not use {name}.", reason="permission_denied")

    @classmethod
    def unavailable(cls, name: str) -> ToolOutcome:
        return cls(ok=False, error=f"{name} is no longer available.")


async def call_tool(tool: Tool, args: BaseModel, ctx: ToolContext) -> ToolOutcome:
    """Run one validated call; whatever the tool raises becomes a failed outcome, never a crash."""
    try:
        output = await tool.run(args, ctx)
    except ToolTimeout as exc:
        return ToolOutcome(ok=False, error=str(exc), reason="timeout")
    except Exception as exc:
        return ToolOutcome(ok=False, error=f"{tool.name} failed: {exc}" if str(exc) else f"{tool.name} failed.")
    return ToolOutcome(ok=True, output=output)


# How a validated call is carried out: call_tool here and now, or (in the run layer) a slow tool as a job.
Execute = Callable[[Tool, BaseModel, ToolContext, str], Awaitable[ToolOutcome]]


async def call_here(tool: Tool, args: BaseModel, ctx: ToolContext, tool_call_id: str) -> ToolOutcome:
    return await call_tool(tool, args, ctx)


class AgentRun:
    def __init__(
        self,
        *,
        provider: Provider,
        tools: Sequence[Tool],
        registry: ToolRegistry,
        ctx: ToolContext,
        system_prompt: str = "",
        max_rounds: int = 8,
        run_id: str | None = None,
        seq: int = 0,
        execute: Execute = call_here,
    ):
        self.provider = provider
        self.tools = {tool.name: tool for tool in tools}
        self.registry = registry
        self.ctx = ctx
        self.system_prompt = system_prompt
        self.max_rounds = max_rounds
        self.run_id = run_id or str(uuid.uuid4())
        self.seq = seq
        self.execute = execute

    def _event(self, cls: type[RunEvent], **fields) -> RunEvent:
        self.seq += 1
        return cls(run_id=self.run_id, seq=self.seq, **fields)

    async def events(self, history: Sequence[ChatMessage]) -> AsyncIterator[RunEvent]:
        history = list(history)
        for round_number in range(1, self.max_rounds + 1):
            answer = None
            async with aclosing(self._ask(history)) as asking:
                async for event in asking:
                    if isinstance(event, ProviderChatResponse):
                        answer = event
                    else:
                        yield event
            if answer is None:
                return  # _ask yielded the run's end already

            yield self._event(AssistantMessage, content=answer.content, tool_calls=answer.tool_calls)
            history.append({"role": "assistant", "content": answer.content, "tool_calls": answer.tool_calls})
            if not answer.tool_calls:
                yield self._event(RunFinished, status="completed")
                return

            awaiting = False
            for call in answer.tool_calls:
                async for event in self._resolve(call, history):
                    awaiting = awaiting or isinstance(event, ConfirmRequired)
                    yield event
            if awaiting:
                yield self._event(RunFinished, status="awaiting_confirmation")
                return
            if round_number == self.max_rounds:
                yield self._event(AssistantMessage, content=LIMIT_MESSAGE)
                yield self._event(RunFinished, status="iteration_limit")
                return

    async def _ask(self, history: list[ChatMessage]) -> AsyncIterator[RunEvent | ProviderChatResponse]:
        """Stream one provider answer; an unusable one is asked for once more, then the run fails."""
        params = ProviderChatParams(
            messages=history,
            system_prompt=self.system_prompt,
            tools=[tool.schema() for tool in self.tools.values()],
        )
        for attempt in (1, 2):
            try:
                # aclosing: when the run is stopped, the provider's stream closes now, not at garbage collection.
                async with aclosing(self.provider.stream(params)) as stream:
                    async for item in stream:
                        if isinstance(item, TextDelta):
                            yield self._event(Token, delta=item.text)
                        else:
                            self._check_tool_names(item)
                            yield item
                            return
                raise ProviderError("The model provider ended its answer without finishing it.")
            except ProviderError as error:
                if error.retryable and attempt == 1:
                    yield self._event(RoundRetry, detail=error.message)
                    continue
                yield self._event(RunFinished, status="failed", error=error.message)
                return

    def _check_tool_names(self, answer: ProviderChatResponse) -> None:
        for call in answer.tool_calls:
            if not self.registry.has(call["name"]):
                raise ProviderError(f"The model called a tool that does not exist: {call['name']}.", retryable=True)

    async def _resolve(self, call, history: list[ChatMessage]) -> AsyncIterator[RunEvent]:
        name, call_id = call["name"], call["id"]
        tool = self.tools.get(name)
        if tool is None:
            outcome = ToolOutcome.denied(name)
        else:
            try:
                args = tool.validate(call["args"])
            except ToolArgumentsError as exc:
                outcome = ToolOutcome(ok=False, error=str(exc), reason="invalid_arguments")
            else:
                if tool.requires_confirmation:
                    yield self._event(ConfirmRequired, tool_call_id=call_id, tool=name, input=call["args"])
                    return
                yield self._event(
                    ToolStart, tool_call_id=call_id, tool=name, input=call["args"], background=tool.in_background
                )
                outcome = await self.execute(tool, args, self.ctx, call_id)
        if outcome.ok:
            result = self._event(ToolEnd, tool_call_id=call_id, tool=name, output=outcome.output)
        else:
            result = self._event(ToolError, tool_call_id=call_id, tool=name, error=outcome.error, reason=outcome.reason)
        yield result
        history.append({"role": "tool", "tool_call_id": call_id, "name": name, "content": result.content})
