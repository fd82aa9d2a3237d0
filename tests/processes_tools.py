"""A dangerous tool for tests/socket/test_processes.py, on the GLOBAL tool registry.

Only the daphne processes those tests start import this (`preload=["tests.processes_tools"]`); the test
process never does, so no other test sees the tool. Each call appends a line to the file named by the
environment variable AGENTCHAT_TEST_TOOL_LOG: the test counts how often the tool really ran. With
AGENTCHAT_TEST_TOOL_DELAY (seconds), the tool takes that long before its line is written.
"""

from __future__ import annotations

import os
import time

from tools.registry import ToolArgs, ToolContext, registry

LOG_ENV = "AGENTCHAT_TEST_TOOL_LOG"
DELAY_ENV = "AGENTCHAT_TEST_TOOL_DELAY"
TOOL_NAME = "processes_write_note"


class NoteArgs(ToolArgs):
    note: str


@registry.tool(name=TOOL_NAME, requires_confirmation=True)
def write_note(args: NoteArgs, ctx: ToolContext) -> dict:
    """Write a note to the shared log (a stand-in for an action that changes the world)."""
    time.sleep(float(os.environ.get(DELAY_ENV) or 0))
    with open(os.environ[LOG_ENV], "a") as log:
        log.write(f"{os.getpid()} {ctx.conversation_id} {args.note}\n")
    return {"written": args.note, "pid": os.getpid()}
