"""What can go wrong with a file, each with the HTTP status and machine code the API answers with."""

from __future__ import annotations

from typing import Any

from .limits import SUPPORTED, SUPPORTED_LABEL


class DocumentError(Exception):
    status = 422
    code = "UNPROCESSABLE"

    def __init__(self, message: str, **extra: Any):
        super().__init__(message)
        self.message = message
        self.extra = extra


class Unreadable(DocumentError):
    """The file claims a supported format but is broken, hostile, or too much to read within the limits."""


class UnsupportedFormat(DocumentError):
    status = 415
    code = "UNSUPPORTED_MEDIA_TYPE"

    def __init__(self, message: str, **extra: Any):
        super().__init__(message, **{"supported": list(SUPPORTED), **extra})

    @classmethod
    def because(cls, what: str) -> UnsupportedFormat:
        """`what` is what the file really is: "a Windows program (EXE)"."""
        error = cls(f"This file is {what}, which is not a supported format. Supported: {SUPPORTED_LABEL}.")
        error.what = what
        return error


class FileTooLarge(DocumentError):
    status = 413
    code = "TOO_LARGE"


class ReadersBusy(DocumentError):
    status = 503
    code = "BUSY"


class TooManyReads(DocumentError):
    status = 429
    code = "RATE_LIMITED"


# By name, for errors that come back from the child process as plain data.
BY_NAME: dict[str, type[DocumentError]] = {
    cls.__name__: cls for cls in (DocumentError, Unreadable, UnsupportedFormat, FileTooLarge, ReadersBusy)
}
