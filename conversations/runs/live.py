"""What this process holds of a run while it streams; everything else is in the database."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ..models import Conversation


@dataclass
class LiveRun:
    run_id: str
    conversation: Conversation
    user: Any
    seq: int = 0
    message_id: int | None = None
    content: str = ""
    dirty: bool = False
    last_assistant_id: int | None = None
    task: asyncio.Task | None = None
    # What the control plane heard for it: a cancel, a request for its text so far, its own end.
    control: asyncio.Queue = field(default_factory=asyncio.Queue)
    # Calls started and not finished yet, as the snapshot for a joining socket shows their cards.
    tools: dict[str, dict[str, Any]] = field(default_factory=dict)
    # False once the run's outcome is decided: a late cancel must not interrupt its clean-up.
    cancellable: bool = True
    # True once its task is inside the part that handles a cancel: cancelled before, it would end without a word.
    driving: bool = False
    after_decision: bool = False
    # Its first steps, when they were taken with the message that started it (db.accept_turn).
    begun: Any = None
    frames_lost: int = 0
    # Of the regenerate or continue frame that asked for this run, which its run_started frame carries back.
    client_id: str | None = None
    # What its turn stored and changed (the echo first), sent before run_started; emptied as they go. A frame, or
    # what makes it: the echo of a message taken in on the event loop is made once the provider has been asked.
    opening: list[dict[str, Any] | Callable[[], dict[str, Any]]] = field(default_factory=list)
    started: bool = False  # run_started is sent
    # Its requests for approval, sent once the gate is released (however the run ended: each stays pending), so
    # that a decision or a new message sent on seeing one does not find the run still going.
    asking: list[dict[str, Any]] = field(default_factory=list)
    # Whether a socket of another process listens to the conversation: its frames then go through the channel layer
    # to every process, otherwise straight to this process's sockets. None until its first frame asks; True from a
    # joining socket's request for the snapshot on (frames after the snapshot reach that socket).
    elsewhere: bool | None = None

    def stop(self) -> None:
        if self.cancellable and self.task is not None:
            self.task.cancel()

    def next_seq(self) -> int:
        self.seq += 1
        return self.seq

    def snapshot(self) -> dict[str, Any]:
        return {
            "run_id": self.run_id,
            "message_id": self.message_id,
            "status": "streaming",
            "content": self.content,
            "seq": self.seq,
            "tools": list(self.tools.values()),
        }
