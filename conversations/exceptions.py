"""What can go wrong on the way in, each with the machine code of the WebSocket protocol."""

from __future__ import annotations


class ChatError(Exception):
    code = "INVALID"

    def __init__(self, message: str):
        super().__init__(message)
        self.message = message


class Invalid(ChatError):
    code = "INVALID"


class NotFound(ChatError):
    code = "NOT_FOUND"


class Busy(ChatError):
    code = "BUSY"


class CheckpointExpired(ChatError):
    code = "CHECKPOINT_EXPIRED"


class RateLimited(ChatError):
    code = "RATE_LIMITED"


class AccessRefused(Exception):
    """The socket's user may no longer act: `refusal` says why (selectors.SocketAccess)."""

    def __init__(self, refusal: str):
        super().__init__(refusal)
        self.refusal = refusal


class AlreadySettled(Exception):
    """A decided call has its result already: it is never stored (or run) twice."""
