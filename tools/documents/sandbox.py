"""Run a function in a child process bounded in wall-clock time, address space, CPU time and file size.

A hostile file can then stall or exhaust only that child, which is killed and answered with a clear
error, while the server goes on serving. Children are forked from a forkserver that imported the
parsers once, so one starts in milliseconds and never inherits the server's threads, sockets or
database connections.
"""

from __future__ import annotations

import contextlib
import errno
import math
import multiprocessing
import os
import resource
import signal
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from multiprocessing.connection import Connection
from typing import Any, TypeVar

from .exceptions import BY_NAME, DocumentError, ReadersBusy, Unreadable
from .limits import MiB

T = TypeVar("T")

PRELOAD = ["tools.documents.parsing"]
# Files read at once by one server process; more wait (up to the time limit) for a free slot. Twice the cores:
# a person may hold only some of them (UPLOAD_PARSES_PER_USER), so others' files never queue behind theirs.
SLOTS = 2 * max(os.cpu_count() or 1, 2)

_slots = threading.BoundedSemaphore(SLOTS)
_context: Any = None
_context_lock = threading.Lock()


@dataclass(frozen=True)
class Budget:
    seconds: float
    memory_bytes: int
    file_bytes: int


def _multiprocessing() -> Any:
    global _context
    with _context_lock:
        if _context is None:
            context = multiprocessing.get_context("forkserver")
            context.set_forkserver_preload(PRELOAD)
            _context = context
        return _context


def run(target: Callable[..., T], *args: Any, budget: Budget) -> T:
    """`target(*args)` in a child process; its DocumentError is raised here, anything else becomes Unreadable."""
    if not _slots.acquire(timeout=budget.seconds):
        raise ReadersBusy("The server is busy reading other files. Try again in a moment.")
    try:
        return _run(target, args, budget)
    finally:
        _slots.release()


def _run(target: Callable[..., T], args: tuple, budget: Budget) -> T:
    context = _multiprocessing()
    receiver, sender = context.Pipe(duplex=False)
    process = context.Process(target=_child, args=(sender, target, args, budget), daemon=True, name="file-reader")
    try:
        process.start()
        sender.close()
        if not receiver.poll(budget.seconds):
            raise Unreadable(f"Reading the file took longer than {budget.seconds:g} seconds, so it was stopped.")
        try:
            outcome, payload = receiver.recv()
        except (EOFError, OSError):
            process.join(1)
            raise Unreadable(_death(process.exitcode, budget)) from None
    finally:
        if process.pid is not None:
            if process.is_alive():
                process.kill()
            process.join()
        receiver.close()
    if outcome == "ok":
        return payload
    name, message, extra = payload
    raise BY_NAME.get(name, Unreadable)(message, **extra)


class OutOfTime(BaseException):
    """A parser used up its processor time. A BaseException, so that no parser's `except Exception` hides it."""


@contextlib.contextmanager
def processor_time(seconds: float) -> Iterator[None]:
    """Raise OutOfTime inside the block once this process has spent `seconds` of processor time in it.

    For the child process's main thread: the signal interrupts Python code between two bytecodes, so a
    parser written in Python stops at once; the RLIMIT_CPU set by `run` stops the rest.
    """

    def expire(signum, frame):
        raise OutOfTime

    previous = signal.signal(signal.SIGPROF, expire)
    signal.setitimer(signal.ITIMER_PROF, max(seconds, 0.001))
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_PROF, 0)
        signal.signal(signal.SIGPROF, previous)


def _death(exitcode: int | None, budget: Budget) -> str:
    if exitcode == -signal.SIGXCPU:
        return f"Reading the file took more than {budget.seconds:g} seconds of processor time, so it was stopped."
    if exitcode == -signal.SIGXFSZ:
        return "Reading the file produced more content than is kept, so it was stopped."
    return (
        f"Reading the file stopped unexpectedly (exit code {exitcode}); it may need more than the "
        f"{budget.memory_bytes // MiB} MB of memory allowed."
    )


def _address_space() -> int:
    try:
        with open("/proc/self/statm") as statm:
            return int(statm.read().split()[0]) * resource.getpagesize()
    except (OSError, ValueError, IndexError):
        return 0


def _cap(limit: int, value: int) -> None:
    _, hard = resource.getrlimit(limit)
    resource.setrlimit(limit, (value if hard == resource.RLIM_INFINITY else min(value, hard), hard))


def _limit(budget: Budget) -> None:
    # The limit is on top of what the forked child already maps (the interpreter and the parser libraries).
    _cap(resource.RLIMIT_AS, _address_space() + budget.memory_bytes)
    # A backstop should the parent fail to kill the child: the kernel ends a spinning one.
    _cap(resource.RLIMIT_CPU, math.ceil(budget.seconds) + 1)
    # Writing past the file limit then fails with an OSError (EFBIG) the parser reports, not a silent signal.
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    _cap(resource.RLIMIT_FSIZE, budget.file_bytes)


def _child(sender: Connection, target: Callable, args: tuple, budget: Budget) -> None:
    try:
        _limit(budget)
        result: tuple[str, Any] = ("ok", target(*args))
    except DocumentError as exc:
        result = ("error", (type(exc).__name__, exc.message, exc.extra))
    except MemoryError:
        message = f"Reading the file needs more than the {budget.memory_bytes // MiB} MB of memory allowed."
        result = ("error", ("Unreadable", message, {}))
    except RecursionError:
        result = ("error", ("Unreadable", "The file nests too deeply to be read (circular references?).", {}))
    except OSError as exc:
        if exc.errno == errno.EFBIG:  # the content file reached RLIMIT_FSIZE
            result = ("error", ("Unreadable", "The file holds more content than is kept.", {}))
        else:
            result = ("error", ("Unreadable", f"The file could not be read ({_brief(exc)}).", {}))
    except Exception as exc:
        # Whatever a parser library raises on a file it chokes on is the file's problem, told briefly.
        result = ("error", ("Unreadable", f"The file could not be read ({_brief(exc)}).", {}))
    try:
        sender.send(result)
    finally:
        sender.close()


def _brief(exc: BaseException) -> str:
    text = f"{type(exc).__name__}: {exc}"
    return text if len(text) <= 200 else text[:199] + "…"
