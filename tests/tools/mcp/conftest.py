"""The test MCP server (tests/mcp_server.py) over stdio, a process of its own, and over streamable HTTP, served
from a thread of the test process; and its tools in registries of their own (never the global one). No server
outlives the tests: a stdio server also stops when the test process dies, as its stdin closes.

Starting a server costs about a second, so the tests that only read share one per transport (`items`, `remote`);
a test that changes a server's state (its tool list, a crash) starts its own with `start_items`. They are all
stopped together when the tests end.
"""

from __future__ import annotations

import asyncio
import socket
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import uvicorn

from tests import mcp_server
from tests.socket.conftest import _isolated_runs, conversation, sockets  # noqa: F401 - for test_socket.py
from tools.mcp.config import parse_servers
from tools.mcp.connection import STOP_TIMEOUT, runtime
from tools.mcp.toolset import ServerTools, register_servers
from tools.registry import ToolContext, ToolRegistry

ROOT = Path(__file__).resolve().parents[3]
PERMISSION = "dashboards.create_branch"  # the demo data gives it to alice, not to bob
SECRET_ENV = "TEST_MCP_IDENTITY_SECRET"
SECRET = "mcp-identity-secret-0123456789abcdef"
READY_TIMEOUT = 10.0


def stdio_entry(**overrides: Any) -> dict[str, Any]:
    legacy = ["--legacy"] if overrides.pop("legacy", False) else []
    return {
        "name": "items",
        "command": [sys.executable, "-m", "tests.mcp_server", *legacy],
        "cwd": str(ROOT),
        "timeout": 1,
        **overrides,
    }


def toolset_of(entry: dict[str, Any]) -> ServerTools:
    """The server's tools in a registry of their own, listed (so the server is running) unless it cannot start."""
    [toolset] = register_servers(ToolRegistry(), parse_servers([entry], variable="MCP_SERVERS", base_dir=ROOT))
    toolset.registry.all()
    return toolset


@pytest.fixture(scope="session")
def started() -> Iterator[list[ServerTools]]:
    """Every server the tests start, all stopped together at the end."""
    toolsets: list[ServerTools] = []
    yield toolsets

    async def stop_all() -> None:
        await asyncio.gather(*(toolset.connection.stopped() for toolset in toolsets))

    runtime.submit(stop_all()).result(STOP_TIMEOUT)


@pytest.fixture
def start_items(started, monkeypatch) -> Callable[..., ServerTools]:
    """A stdio server of the test's own, for a test that changes it (its tools, a crash)."""
    monkeypatch.setenv(SECRET_ENV, SECRET)

    def start(**overrides: Any) -> ServerTools:
        toolset = toolset_of(stdio_entry(**overrides))
        started.append(toolset)
        return toolset

    return start


@pytest.fixture(scope="session")
def items(started) -> ServerTools:
    """One stdio server for the tests that leave it as it was; its tools need PERMISSION."""
    toolset = toolset_of(stdio_entry(permission=PERMISSION))
    started.append(toolset)
    return toolset


@pytest.fixture(scope="session")
def http_server() -> Iterator[str]:
    """The test server over streamable HTTP, served by uvicorn from a thread of this process; its URL."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    app = mcp_server.server.streamable_http_app(streamable_http_path="/mcp")
    config = uvicorn.Config(
        app, host="127.0.0.1", port=port, loop="asyncio", log_level="warning", timeout_graceful_shutdown=1
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, name="mcp test server", daemon=True)
    thread.start()
    deadline = time.monotonic() + READY_TIMEOUT
    while not server.started:
        assert thread.is_alive() and time.monotonic() < deadline, "the MCP test server did not start"
        time.sleep(0.02)
    yield f"http://127.0.0.1:{port}/mcp"
    server.should_exit = True
    thread.join(READY_TIMEOUT)


def http_entry(url: str, **overrides: Any) -> dict[str, Any]:
    # Generous: nothing here waits a timeout out (a cut connection is seen as closed), and a loaded machine is slow.
    return {"name": "remote", "url": url, "identity_secret_env": SECRET_ENV, "timeout": 10, **overrides}


@pytest.fixture(scope="session")
def remote(http_server) -> Iterator[ServerTools]:
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(SECRET_ENV, SECRET)
        toolset = toolset_of(http_entry(http_server))
    yield toolset
    toolset.connection.stop()  # before the server stops, which would wait for this session's open stream


async def run(toolset: ServerTools, name: str, args: dict[str, Any], user=None) -> Any:
    """A call as the agent makes it: strictly validated arguments, the tool's own timeout."""
    tool = toolset.registry.get(name)
    return await tool.run(tool.validate(args), ToolContext(user=user))
