"""What a run yields, in order. Each event knows its frame of the WebSocket protocol (docs/protocol.md)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, ClassVar, Literal

from .calls import Outcome, ToolOutcome
from .providers import ToolCall, Usage

RunStatus = Literal["completed", "cancelled", "awaiting_confirmation", "iteration_limit", "failed"]


@dataclass(kw_only=True)
class RunEvent:
    type: ClassVar[str]
    run_id: str
    seq: int

    def frame(self) -> dict[str, Any]:
        return {"type": self.type, **asdict(self)}


@dataclass(kw_only=True)
class Token(RunEvent):
    type: ClassVar[str] = "token"
    delta: str

    def frame(self) -> dict[str, Any]:
        # The most frequent frame, made without asdict's recursive copy, which took 30 times as long.
        return {"type": self.type, "run_id": self.run_id, "seq": self.seq, "delta": self.delta}


@dataclass(kw_only=True)
class AssistantMessage(RunEvent):
    """One round's answer is complete: its text and the tool calls it asks for (none when final). `stopped` says
    why the run stops here without having finished (the step limit), in words for the person."""

    type: ClassVar[str] = "assistant_message"
    content: str
    tool_calls: list[ToolCall] = field(default_factory=list)
    stopped: str = ""
    usage: Usage | None = None


@dataclass(kw_only=True)
class ToolStart(RunEvent):
    type: ClassVar[str] = "tool_start"
    tool_call_id: str
    tool: str
    input: dict[str, Any]
    # A slow tool: it runs as a job in the background worker, and the run waits for it.
    background: bool = False


@dataclass(kw_only=True)
class ToolEnd(RunEvent):
    type: ClassVar[str] = "tool_end"
    tool_call_id: str
    tool: str
    output: Any

    def result(self) -> ToolOutcome:
        return ToolOutcome.done(self.output)


@dataclass(kw_only=True)
class ToolError(RunEvent):
    """The call did not produce a result; `outcome` says why (see calls.Outcome), `error` says it in words."""

    type: ClassVar[str] = "tool_error"
    tool_call_id: str
    tool: str
    error: str
    outcome: str = Outcome.ERROR.value

    def result(self) -> ToolOutcome:
        return ToolOutcome(Outcome(self.outcome), error=self.error)


def result_event(outcome: ToolOutcome, **fields: Any) -> ToolEnd | ToolError:
    """How a call ended, as its event: `tool_end` when it was done, else `tool_error` saying why."""
    if outcome.ok:
        return ToolEnd(output=outcome.output, **fields)
    return ToolError(error=outcome.error, outcome=outcome.outcome.value, **fields)


@dataclass(kw_only=True)
class ConfirmRequired(RunEvent):
    """A dangerous call waits for its owner; the run layer stores it and adds the confirmation's id."""

    type: ClassVar[str] = "confirm_required"
    tool_call_id: str
    tool: str
    input: dict[str, Any]


@dataclass(kw_only=True)
class Notice(RunEvent):
    type: ClassVar[str] = "notice"
    code: str
    detail: str


@dataclass(kw_only=True)
class RoundRetry(Notice):
    """The provider's answer could not be used and is asked for again: text of this round so far is void."""

    code: str = "PROVIDER_RETRY"


@dataclass(kw_only=True)
class RunFinished(RunEvent):
    type: ClassVar[str] = "run_finished"
    status: RunStatus
    error: str = ""
