"""A cancelled task is let go by reference counting, not left to the garbage collector's full passes."""

from __future__ import annotations

import asyncio
import gc
import weakref

from agentchat import tasks


class Timer:
    """As a socket's timers: a task running a method of the object that holds it."""

    def __init__(self):
        self.task = asyncio.create_task(self.wait())

    async def wait(self) -> None:
        await asyncio.sleep(3600)


async def test_a_cancelled_task_and_the_object_holding_it_are_freed_as_soon_as_nothing_refers_to_them():
    gc.disable()
    try:
        timer = Timer()
        await asyncio.sleep(0)  # the task waits in its method
        tasks.cancel(timer.task)
        await asyncio.sleep(0)  # the cancellation reaches the task
        await asyncio.sleep(0)  # its done callbacks run
        assert timer.task.cancelled()
        gone = weakref.ref(timer)
        del timer
        assert gone() is None
    finally:
        gc.enable()
