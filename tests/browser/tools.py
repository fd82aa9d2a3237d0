"""Tools for the browser tests, on the GLOBAL tool registry of the daphne process those tests start.

Only that process imports this module (`preload=["tests.browser.tools"]`); the test process never does,
so no other test sees these tools.
"""

from __future__ import annotations

import time
from typing import Literal

from pydantic import Field

from tools.registry import ToolArgs, ToolContext, registry


class LookupArgs(ToolArgs):
    query: str
    seconds: float = Field(default=0.0, ge=0, le=5)


class DeployArgs(ToolArgs):
    dashboard: str
    environment: str = "staging"


@registry.tool(name="browser_lookup", timeout=10)
def lookup(args: LookupArgs, ctx: ToolContext) -> dict:
    """Look a word up in the test catalogue (takes `seconds`, so a page can watch it run)."""
    time.sleep(args.seconds)
    return {"query": args.query, "matches": [f"{args.query} report", f"{args.query} forecast"]}


@registry.tool(name="browser_deploy", requires_confirmation=True)
def deploy(args: DeployArgs, ctx: ToolContext) -> dict:
    """Deploy a dashboard to an environment (a stand-in for an action that changes the world)."""
    return {"deployed": args.dashboard, "environment": args.environment}


@registry.tool(name="browser_fail")
def fail(args: LookupArgs, ctx: ToolContext) -> dict:
    """A tool that always fails."""
    raise RuntimeError(f"the catalogue is down (asked for {args.query})")


@registry.tool(name="browser_slow_report", slow=True)
def slow_report(args: LookupArgs, ctx: ToolContext) -> dict:
    """Compile a report (slow: it runs as a background job, in the worker the test starts)."""
    time.sleep(args.seconds)
    return {"report": f"{args.query} report", "pages": 12}


class ReleaseArgs(ToolArgs):
    dashboard_id: int = Field(ge=1, le=999, description="The dashboard's id.")
    environment: Literal["staging", "production"] = Field(description="Where to release it.")
    notify: bool = Field(default=True, description="Tell the dashboard's owners.")
    note: str = Field(default="", max_length=40, description="A note for the release log.")


@registry.tool(name="browser_release", requires_confirmation=True)
def release(args: ReleaseArgs, ctx: ToolContext) -> dict:
    """Release a dashboard (its arguments are an integer, an enum, a boolean and a string: the approval's form)."""
    return {"released": args.dashboard_id, "environment": args.environment, "notified": args.notify}


class ConfigureArgs(ToolArgs):
    dashboard: str
    limits: dict[str, int]


@registry.tool(name="browser_configure", requires_confirmation=True)
def configure(args: ConfigureArgs, ctx: ToolContext) -> dict:
    """Set a dashboard's limits (an object argument: the approval edits it as JSON)."""
    return {"configured": args.dashboard, "limits": args.limits}
