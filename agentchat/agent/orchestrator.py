"""One run of the agent: rounds of provider → carry out the calls (calls.carry_out), yielded as events.

The engine is plain async Python. It is handed the history, the tools this user may use and the
provider, and yields events; storing them, fanning them out and cancelling are the caller's work.
Resuming after a confirmation is running again on a history that holds the decision's tool message.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import AsyncIterator, Sequence
from contextlib import aclosing
from dataclasses import replace

from agentchat.text import storable
from tools.registry import Tool

from .calls import NeedsConfirmation, Started, ToolAccess, carry_out, with_every_result
from .events import (
    AssistantMessage,
    ConfirmRequired,
    RoundRetry,
    RunEvent,
    RunFinished,
    Token,
    ToolStart,
    result_event,
)
from .providers import ChatMessage, Provider, ProviderChatParams, ProviderChatResponse, ProviderError, TextDelta

logger = logging.getLogger(__name__)

LIMIT_MESSAGE = "Reached maximum iteration limit"


class AgentRun:
    def __init__(
        self,
        *,
        provider: Provider,
        tools: Sequence[Tool],
        access: ToolAccess,
        withheld: Sequence[Tool] = (),
        system_prompt: str = "",
        max_rounds: int = 8,
        run_id: str | None = None,
        seq: int = 0,
    ):
        """`tools` are offered to the model; `access` carries out what it calls (and checks each call again);
        `withheld`, the tools the user may not use, are only named to it."""
        self.provider = provider
        self.tools = list(tools)
        self.withheld = list(withheld)
        self.access = access
        self.system_prompt = system_prompt
        self.max_rounds = max_rounds
        self.run_id = run_id or str(uuid.uuid4())
        self.seq = seq

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

            yield self._event(
                AssistantMessage, content=answer.content, tool_calls=answer.tool_calls, usage=answer.usage
            )
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
                stopped = f"The agent used all of its {self.max_rounds} steps before finishing."
                yield self._event(AssistantMessage, content=LIMIT_MESSAGE, stopped=stopped)
                yield self._event(RunFinished, status="iteration_limit")
                return

    async def _ask(self, history: list[ChatMessage]) -> AsyncIterator[RunEvent | ProviderChatResponse]:
        """Stream one provider answer; an unusable one is asked for once more, then the run fails."""
        messages = with_every_result(history)
        if messages != history:
            logger.error("run %s: a tool call had no result in the history; the model is told so", self.run_id)
        params = ProviderChatParams(
            messages=messages,
            system_prompt=self.system_prompt,
            tools=[tool.schema() for tool in self.tools],
            withheld=[tool.schema() for tool in self.withheld],
        )
        for attempt in (1, 2):
            try:
                # aclosing: when the run is stopped, the provider's stream closes now, not at garbage collection.
                async with aclosing(self.provider.stream(params)) as stream:
                    async for item in stream:
                        # What the model wrote is stored and shown: as every database takes it.
                        if isinstance(item, TextDelta):
                            yield self._event(Token, delta=storable(item.text))
                        else:
                            item = replace(item, content=storable(item.content), tool_calls=storable(item.tool_calls))
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
            if self.access.lookup(call["name"]) is None:
                raise ProviderError(f"The model called a tool that does not exist: {call['name']}.", retryable=True)

    async def _resolve(self, call, history: list[ChatMessage]) -> AsyncIterator[RunEvent]:
        name, call_id = call["name"], call["id"]
        async for step in carry_out(self.access, call_id, name, call["args"]):
            if isinstance(step, NeedsConfirmation):
                yield self._event(ConfirmRequired, tool_call_id=call_id, tool=name, input=step.args)
            elif isinstance(step, Started):
                yield self._event(
                    ToolStart, tool_call_id=call_id, tool=name, input=step.args, background=step.tool.in_background
                )
            else:
                self.seq += 1
                yield result_event(step, run_id=self.run_id, seq=self.seq, tool_call_id=call_id, tool=name)
                history.append(
                    {
                        "role": "tool",
                        "tool_call_id": call_id,
                        "name": name,
                        "content": step.content,
                        "outcome": step.outcome,
                    }
                )
