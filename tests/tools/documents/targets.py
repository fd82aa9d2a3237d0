"""Functions the sandbox tests run in a child process; importable there, so nothing from Django."""

from __future__ import annotations

import time

from tools.documents.exceptions import Unreadable


def spin(seconds: float) -> str:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        pass
    return "finished"


def allocate(megabytes: int) -> int:
    block = bytearray(megabytes * 1024 * 1024)
    return len(block)


def refuse() -> None:
    raise Unreadable("Not today.")


def crash() -> None:
    raise RuntimeError("boom")


def die() -> None:
    import os
    import signal

    os.kill(os.getpid(), signal.SIGSEGV)


def write(path: str, megabytes: int) -> int:
    with open(path, "wb") as out:
        for _ in range(megabytes):
            out.write(b"x" * 1024 * 1024)
    return megabytes


def echo(value):
    return value
