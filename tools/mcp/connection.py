"""The process's MCP sessions, each owned by a task on one event loop that runs in a thread of its own.

An MCP session (the SDK is anyio-based) belongs to the task and the event loop that opened it, while tools run on
daphne's loop, on a test's loop of the moment or in a worker thread: each of those hands its call to this loop and
waits for the answer, so one session serves them all and none of them owns it.
"""

from __future__ import annotations

import asyncio
import atexit
import concurrent.futures
import contextvars
import functools
import logging
import threading
from collections.abc import AsyncIterator, Callable, Coroutine
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass, field
from typing import Any, TypeVar

import anyio
import httpx2
from mcp import Client, StdioServerParameters, types
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from mcp.shared.message import SessionMessage
from mcp.types.version import MODERN_PROTOCOL_VERSIONS

from .config import McpServer
from .exceptions import McpCallError, ServerUnavailable

logger = logging.getLogger(__name__)

T = TypeVar("T")

# Where a started server finds the identity token of a call (when its entry asks for one): the call's `_meta`.
IDENTITY_META_KEY = "agentchat/identity"
CLIENT_INFO = types.Implementation(name="AgentChat", version="1.0")
MAX_PAGES = 100
STOP_TIMEOUT = 5.0
# A url server may keep a response stream open and quiet for a long time (the SDK's own default).
STREAM_READ_TIMEOUT = 300.0

# The identity token of the call being sent, for the HTTP client's request hook: the SDK sends each request in a
# task that runs in the context of the task that made the call.
_identity: contextvars.ContextVar[str | None] = contextvars.ContextVar("mcp_identity", default=None)


class Runtime:
    """The thread and event loop of every MCP session of the process, started at first use."""

    def __init__(self) -> None:
        self._loop: asyncio.AbstractEventLoop | None = None
        self._lock = threading.Lock()
        self.open: set[Connection] = set()

    def submit(self, coroutine: Coroutine[Any, Any, T]) -> concurrent.futures.Future[T]:
        with self._lock:
            if self._loop is None:
                self._loop = asyncio.new_event_loop()
                threading.Thread(target=self._loop.run_forever, name="mcp", daemon=True).start()
                atexit.register(self.stop)
            return asyncio.run_coroutine_threadsafe(coroutine, self._loop)

    def stop(self) -> None:
        """Stop every open session, so that no started server outlives the process."""

        async def stop_all() -> None:
            await asyncio.gather(*(connection.stopped() for connection in list(self.open)))

        try:
            self.submit(stop_all()).result(STOP_TIMEOUT)
        except TimeoutError:
            logger.warning("MCP servers still running after %g s: %s", STOP_TIMEOUT, self.open)


runtime = Runtime()


def _reason(error: BaseException) -> str:
    while isinstance(error, BaseExceptionGroup) and error.exceptions:
        error = error.exceptions[0]
    if isinstance(error, MCPError):
        return error.error.message
    return str(error) or type(error).__name__


def _retrieve(future: asyncio.Future[Any]) -> None:
    # A start that failed with nobody waiting any more is not an error to log: the next call tries again.
    if not future.cancelled():
        future.exception()


@asynccontextmanager
async def _transport(server: McpServer, over: asyncio.Event) -> AsyncIterator[Any]:
    """The server's message streams; `over` is set when its side ends (a started server that exited)."""
    async with AsyncExitStack() as stack:
        if server.command:
            program, *args = server.command
            streams = stdio_client(StdioServerParameters(command=program, args=args, env=server.env, cwd=server.cwd))
        else:
            hooks = {"request": [_identity_hook(server.identity_header)]} if server.identity else {}
            timeout = httpx2.Timeout(server.start_timeout, read=STREAM_READ_TIMEOUT)
            http = await stack.enter_async_context(
                httpx2.AsyncClient(headers=server.headers, timeout=timeout, event_hooks=hooks)
            )
            streams = streamable_http_client(str(server.url), http_client=http)
        read_stream, write_stream = await stack.enter_async_context(streams)
        forward, received = anyio.create_memory_object_stream[SessionMessage | Exception](0)

        async def relay() -> None:
            try:
                async with forward:
                    async for message in read_stream:
                        await forward.send(message)
            except (anyio.BrokenResourceError, anyio.ClosedResourceError):
                pass  # the session is closing
            over.set()

        tasks = await stack.enter_async_context(anyio.create_task_group())
        tasks.start_soon(relay)
        try:
            yield received, write_stream
        finally:
            tasks.cancel_scope.cancel()


def _identity_hook(header: str) -> Callable[[httpx2.Request], Coroutine[Any, Any, None]]:
    async def add_identity(request: httpx2.Request) -> None:
        token = _identity.get()
        if token:
            request.headers[header] = token

    return add_identity


async def _list_tools(client: Client) -> list[types.Tool]:
    tools: list[types.Tool] = []
    cursor = None
    for _ in range(MAX_PAGES):
        page = await client.list_tools(cursor=cursor)
        tools.extend(page.tools)
        cursor = page.next_cursor
        if cursor is None:
            break
    return tools


@dataclass(eq=False)
class _Session:
    """One opening of a server: ready once its tools are listed, over when the server stops or the session is ended."""

    ready: asyncio.Future[Client]
    over: asyncio.Event = field(default_factory=asyncio.Event)
    changed: asyncio.Event = field(default_factory=asyncio.Event)
    task: asyncio.Task[None] | None = None

    @property
    def client(self) -> Client | None:
        ready = self.ready
        return ready.result() if ready.done() and not ready.cancelled() and not ready.exception() else None


class Connection:
    """One server's session in this process: opened at first need, and again after the server stopped.

    Its coroutines run on the runtime's loop; other threads and loops use `start`, `call` and `stop`.
    """

    def __init__(
        self, server: McpServer, *, on_listing: Callable[[list[types.Tool]], None], runtime: Runtime = runtime
    ):
        self.server = server
        self.on_listing = on_listing
        self.runtime = runtime
        self.listing: list[types.Tool] | None = None
        self.problem = ""
        self.starts = 0
        self._session: _Session | None = None

    def __repr__(self) -> str:
        return f"<MCP server {self.server.name}: {self.server.where}>"

    @property
    def connected(self) -> bool:
        session = self._session
        return session is not None and session.client is not None and not session.over.is_set()

    @property
    def restart_notice(self) -> str:
        """Said with the result of a call that had to start the server again (or connect to it again)."""
        if self.server.command:
            return f"MCP server '{self.server.name}' had stopped; it was started again for this call."
        return f"The connection to MCP server '{self.server.name}' had been lost; it was made again for this call."

    # --- from any thread or loop ---------------------------------------------------------------------

    def start(self) -> concurrent.futures.Future[None]:
        """Open the session unless it is open: done when the tools are listed, or with ServerUnavailable."""

        async def opened() -> None:
            await self._open()

        return self.runtime.submit(opened())

    async def call(
        self, name: str, arguments: dict[str, Any], *, identity: str | None
    ) -> tuple[types.CallToolResult, bool]:
        """The server's result, and whether the server had to be started again for this call."""
        return await asyncio.wrap_future(self.runtime.submit(self._call(name, arguments, identity=identity)))

    def stop(self) -> None:
        """End the session (a started server stops with it), waiting a bounded time; past it, as `Runtime.stop`,
        the server is left to end on the runtime's loop, and said so."""
        try:
            self.runtime.submit(self.stopped()).result(STOP_TIMEOUT)
        except TimeoutError:
            logger.warning("MCP server '%s' still running after %g s", self.server.name, STOP_TIMEOUT)

    # --- on the runtime's loop -----------------------------------------------------------------------

    async def stopped(self) -> None:
        session = self._session
        if session is None or session.task is None:
            return
        session.over.set()
        if not session.ready.done():
            session.task.cancel()
        await asyncio.gather(session.task, return_exceptions=True)

    async def _open(self) -> tuple[_Session, Client]:
        session = self._session
        if session is None or session.over.is_set():
            session = self._session = _Session(ready=asyncio.get_running_loop().create_future())
            session.ready.add_done_callback(_retrieve)
            session.task = asyncio.create_task(self._own(session), name=f"MCP server {self.server.name}")
        try:
            return session, await asyncio.wait_for(asyncio.shield(session.ready), self.server.start_timeout)
        except TimeoutError:
            self.problem = f"it did not start within {self.server.start_timeout:g} s"
            session.task.cancel()
            raise ServerUnavailable(f"MCP server '{self.server.name}' is not available: {self.problem}.") from None

    async def _own(self, session: _Session) -> None:
        """Open the session, list the tools, follow their changes, and close the session when it is over."""
        try:
            async with (
                Client(
                    _transport(self.server, session.over),
                    read_timeout_seconds=self.server.timeout,
                    message_handler=functools.partial(self._on_message, session),
                    client_info=CLIENT_INFO,
                    cache=None,
                ) as client,
                anyio.create_task_group() as tasks,
            ):
                self.listing = await _list_tools(client)
                self.problem = ""
                self.starts += 1
                self.runtime.open.add(self)
                session.ready.set_result(client)
                self._listed()
                tasks.start_soon(self._follow_changes, client, session)
                await session.over.wait()
                tasks.cancel_scope.cancel()
        except Exception as exc:
            self.problem = _reason(exc)
            logger.warning("%s: %s", self.server, self.problem)
        finally:
            session.over.set()
            if self._session is session:
                self.runtime.open.discard(self)
            if not session.ready.done():
                verb = "started" if self.server.command else "reached"
                session.ready.set_exception(
                    ServerUnavailable(
                        f"MCP server '{self.server.name}' could not be {verb}: {self.problem or 'it stopped'}."
                    )
                )

    def _listed(self) -> None:
        try:
            self.on_listing(self.listing or [])
        except Exception:
            logger.exception("%s: its tools could not be registered", self.server)

    async def _on_message(self, session: _Session, message: Any) -> None:
        # Servers of the handshake era say so on the session itself; listing again here would block the reading.
        if isinstance(message, types.ToolListChangedNotification):
            session.changed.set()

    async def _follow_changes(self, client: Client, session: _Session) -> None:
        """List the tools again each time the server says they changed."""
        async with anyio.create_task_group() as tasks:
            tools = client.server_capabilities.tools
            if client.protocol_version in MODERN_PROTOCOL_VERSIONS and tools is not None and tools.list_changed:
                tasks.start_soon(self._listen, client, session)
            while True:
                await session.changed.wait()
                session.changed.clear()
                try:
                    self.listing = await _list_tools(client)
                except MCPError as exc:
                    logger.warning("%s: could not list its tools again: %s", self.server, _reason(exc))
                    continue
                self._listed()

    async def _listen(self, client: Client, session: _Session) -> None:
        """Servers of the 2026 protocol tell only those who subscribe."""
        try:
            async with client.listen(tools_list_changed=True) as subscription:
                async for _event in subscription:
                    session.changed.set()
        except (MCPError, RuntimeError, TimeoutError) as exc:
            logger.info("%s: no more news of changes to its tools (%s)", self.server, _reason(exc))

    async def _call(
        self, name: str, arguments: dict[str, Any], *, identity: str | None
    ) -> tuple[types.CallToolResult, bool]:
        restarted = not self.connected and self.starts > 0
        session, client = await self._open()
        started_here = bool(self.server.command)
        _identity.set(None if started_here else identity)
        meta = {IDENTITY_META_KEY: identity} if identity and started_here else None
        try:
            result = await client.call_tool(name, arguments, read_timeout_seconds=self.server.timeout, meta=meta)
        except MCPError as exc:
            if exc.code == types.CONNECTION_CLOSED:
                session.over.set()
            raise self._failure(exc) from None
        return result, restarted

    def _failure(self, error: MCPError) -> McpCallError:
        server = f"MCP server '{self.server.name}'"
        if error.code == types.REQUEST_TIMEOUT:
            return McpCallError(f"{server} did not answer within {self.server.timeout:g} s.")
        if error.code == types.CONNECTION_CLOSED:
            what = f"{server} stopped" if self.server.command else f"The connection to {server} was lost"
            again = "started again" if self.server.command else "made again"
            return McpCallError(
                f"{what} during the call, so whether it took effect is not known. It is {again} at the next call."
            )
        return McpCallError(f"{server} answered with an error: {error.error.message}")
