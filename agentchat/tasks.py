"""Cancelling a task without leaving it to the garbage collector."""

from __future__ import annotations

import asyncio
import contextlib


def cancel(task: asyncio.Task) -> None:
    """Cancel `task`, and let its CancelledError go once it has ended.

    A cancelled task keeps that error until something asks for its result, and the error's traceback holds the
    task's frames: when one of them is a method of an object that holds the task, they make a cycle that only the
    garbage collector frees, in a full pass that pauses every stream of the process (docs/benchmarks.md).
    """
    task.cancel()
    task.add_done_callback(_let_go)


def _let_go(task: asyncio.Task) -> None:
    if task.cancelled():
        with contextlib.suppress(asyncio.CancelledError):
            task.result()
