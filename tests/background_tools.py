"""Slow tools for tests/socket/test_background_jobs.py.

`build(registry)` registers them: the tests on a registry of their own, the worker processes they start on
the global one (`install`, named in `start_worker(preload=[...])`). Each tool appends "start" and "end" lines
to the file named by AGENTCHAT_TEST_JOB_LOG, and holds until a file named after its `note` appears in the
folder named by AGENTCHAT_TEST_JOB_GATE: the test decides when the job ends.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

from tools.registry import ToolArgs, ToolContext, ToolRegistry

LOG_ENV = "AGENTCHAT_TEST_JOB_LOG"
GATE_ENV = "AGENTCHAT_TEST_JOB_GATE"
REPORT = "compile_report"
PUBLISH = "publish_report"
LONG = "archive_everything"


class ReportArgs(ToolArgs):
    note: str


def _work(tool: str, args: ReportArgs, ctx: ToolContext) -> dict:
    log = Path(os.environ[LOG_ENV])
    with log.open("a") as out:
        out.write(f"start {tool} {args.note} {os.getpid()}\n")
    gate = Path(os.environ[GATE_ENV]) / args.note
    while not gate.exists():
        time.sleep(0.05)
    with log.open("a") as out:
        out.write(f"end {tool} {args.note} {os.getpid()}\n")
    return {"report": f"{tool} {args.note}", "for": ctx.user.username, "conversation": ctx.conversation_id}


def build(registry: ToolRegistry) -> None:
    @registry.tool(name=REPORT, slow=True, timeout=20)
    def compile_report(args: ReportArgs, ctx: ToolContext) -> dict:
        """Compile a report over every dashboard (takes minutes)."""
        return _work(REPORT, args, ctx)

    @registry.tool(name=PUBLISH, slow=True, timeout=20, requires_confirmation=True)
    def publish_report(args: ReportArgs, ctx: ToolContext) -> dict:
        """Publish a report to every subscriber (takes minutes, cannot be undone)."""
        return _work(PUBLISH, args, ctx)

    @registry.tool(name=LONG, timeout=600)
    def archive_everything(args: ReportArgs, ctx: ToolContext) -> dict:
        """Archive every dashboard (may take up to ten minutes)."""
        return _work(LONG, args, ctx)


def install() -> None:
    from tools.registry import registry

    build(registry)
