"""Real daphne server processes for tests that need more than one process (or a real browser).

    server = start_daphne(llm=fake_llm, log_dir=tmp_path)
    try:
        ... talk to server.http_url / server.ws_url(path) ...
    finally:
        server.stop()

Each process serves `agentchat.asgi:application` on a free port of 127.0.0.1 with the test run's
environment plus what it needs to share the test's state: the database the tests are using (for
PostgreSQL the test database, `test_agentchat`), the same REDIS_URL and SECRET_KEY as the test process
(so sessions and JWTs made in a test are valid there), and the fake provider's LLM_* settings.
Rows a test writes are only visible to a server when committed: use `django_db(transaction=True)`.

`preload` names modules to import in the server before it serves (e.g. a test-only tool module that
registers on the global tool registry). Never import such a module in the test process itself.

`RemoteSocket` is a WebSocket client (the `websockets` package) with the frame helpers tests want.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any
from urllib.parse import quote

from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed

BASE_DIR = Path(__file__).resolve().parent.parent
HOST = "127.0.0.1"
READY_TIMEOUT = 20.0
STOP_TIMEOUT = 5.0
LLM_API_KEY = "sk-test-SECRET-123"
LLM_MODEL = "fake-model"

# `python -c BOOT <modules> <daphne args…>`: import the modules once Django is set up, then run the server.
_BOOT = (
    "import importlib, sys, django; "
    "modules = sys.argv.pop(1); "
    "django.setup(); "
    "[importlib.import_module(name) for name in modules.split(',') if name]; "
    "from agentchat.server import main; "
    "main()"
)

# `python -c WORKER_BOOT <names> <worker args…>`: once Django is set up, import each `module` named, or call each
# `module:function` (e.g. to register test tools on the global registry), then run the background worker.
_WORKER_BOOT = (
    "import importlib, sys, django; "
    "names = sys.argv.pop(1); "
    "django.setup(); "
    "[getattr(importlib.import_module(module), function)() if function else importlib.import_module(module) "
    "for module, _, function in (name.partition(':') for name in names.split(',') if name)]; "
    "from django.core.management import execute_from_command_line; "
    "execute_from_command_line(['manage.py', 'db_worker', *sys.argv[1:]])"
)

_running: set[DaphneProcess] = set()


class DaphneStartError(RuntimeError):
    pass


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind((HOST, 0))
        return probe.getsockname()[1]


def database_url() -> str:
    """A DATABASE_URL for the database this process is using now (inside tests: the test database)."""
    from django.db import connection

    config = connection.settings_dict
    engine = config["ENGINE"]
    if engine.endswith("postgresql"):
        user = quote(config.get("USER") or "", safe="")
        password = quote(config.get("PASSWORD") or "", safe="")
        credentials = f"{user}:{password}@" if password else (f"{user}@" if user else "")
        port = f":{config['PORT']}" if config.get("PORT") else ""
        return f"postgres://{credentials}{config.get('HOST') or 'localhost'}{port}/{quote(str(config['NAME']))}"
    if engine.endswith("sqlite3"):
        name = str(config["NAME"])
        if name == ":memory:" or "mode=memory" in name:
            raise DaphneStartError(
                "The test database is an in-memory SQLite database, which another process cannot open. "
                "Give the default database a file TEST NAME, or run these tests on PostgreSQL."
            )
        return f"sqlite:///{Path(name).resolve()}"
    raise DaphneStartError(f"No DATABASE_URL for the database engine {engine}.")


def server_env(env_overrides: dict[str, str] | None = None, *, llm=None) -> dict[str, str]:
    """The environment of a server process: this one's, plus the shared state, plus `env_overrides`."""
    from django.conf import settings

    env = dict(os.environ)
    env.update(
        {
            "DJANGO_SETTINGS_MODULE": os.environ.get("DJANGO_SETTINGS_MODULE", "agentchat.settings"),
            "DATABASE_URL": database_url(),
            "SECRET_KEY": settings.SECRET_KEY,
            "RUN_HEARTBEAT_TIMEOUT": "3",
            "PYTHONUNBUFFERED": "1",
        }
    )
    if getattr(settings, "REDIS_URL", ""):
        env["REDIS_URL"] = settings.REDIS_URL
    else:
        env.pop("REDIS_URL", None)
    if llm is not None:
        env.update(
            {
                "LLM_PROVIDER": "openai-compatible",
                "LLM_MODEL": LLM_MODEL,
                "LLM_API_KEY": LLM_API_KEY,
                "LLM_BASE_URL": llm if isinstance(llm, str) else llm.base_url,
                "LLM_TIMEOUT": "10",
            }
        )
    env.update(env_overrides or {})
    return env


class DaphneProcess:
    """One daphne process; `spawn()` starts it, `wait_ready()` waits until it accepts connections."""

    def __init__(self, env: dict[str, str], *, preload=(), log_dir: Path | str | None = None, name: str = "daphne"):
        self.env = env
        self.preload = tuple(preload)
        self.log_dir = Path(log_dir) if log_dir is not None else Path(tempfile.mkdtemp(prefix="daphne-"))
        self.name = name
        self.port = 0
        self.log_path = self.log_dir / f"{name}.log"
        self.process: subprocess.Popen | None = None

    def __repr__(self) -> str:
        return f"<DaphneProcess {self.name} pid={self.pid} port={self.port}>"

    # --- where it is ---------------------------------------------------------------------------

    @property
    def pid(self) -> int | None:
        return self.process.pid if self.process else None

    @property
    def http_url(self) -> str:
        return f"http://{HOST}:{self.port}"

    @property
    def origin(self) -> str:
        return self.http_url

    def ws_url(self, path: str) -> str:
        return f"ws://{HOST}:{self.port}{path}"

    # --- life ----------------------------------------------------------------------------------

    def command(self) -> list[str]:
        daphne_args = ["-b", HOST, "-p", str(self.port), "agentchat.asgi:application"]
        if self.preload:
            return [sys.executable, "-c", _BOOT, ",".join(self.preload), *daphne_args]
        return [sys.executable, "-m", "agentchat.server", *daphne_args]

    def spawn(self) -> DaphneProcess:
        self.port = free_port()
        self.log_dir.mkdir(parents=True, exist_ok=True)
        with open(self.log_path, "ab") as log:
            log.write(f"=== {' '.join(self.command()[-5:])}\n".encode())
            log.flush()
            self.process = subprocess.Popen(  # noqa: S603 - our own interpreter and arguments
                self.command(),
                cwd=BASE_DIR,
                env=self.env,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        _running.add(self)
        return self

    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def wait_ready(self, timeout: float = READY_TIMEOUT) -> DaphneProcess:
        deadline = time.monotonic() + timeout
        while True:
            if not self.running():
                raise DaphneStartError(f"{self} exited with {self.process and self.process.returncode}:\n{self.tail()}")
            with contextlib.suppress(OSError), socket.create_connection((HOST, self.port), timeout=0.5):
                return self
            if time.monotonic() > deadline:
                self.kill()
                raise DaphneStartError(f"{self} did not accept connections within {timeout:g} s:\n{self.tail()}")
            time.sleep(0.05)

    def kill(self) -> None:
        """SIGKILL: the process gets no chance to clean up, as in a crash."""
        if self.running():
            with contextlib.suppress(ProcessLookupError):
                self.process.send_signal(signal.SIGKILL)
        self._reap(STOP_TIMEOUT)

    def stop(self, timeout: float = STOP_TIMEOUT) -> None:
        """SIGTERM, then SIGKILL if it has not exited within `timeout`."""
        if self.running():
            self.process.terminate()
            try:
                self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                self.process.kill()
        self._reap(timeout)

    def _reap(self, timeout: float) -> None:
        if self.process is not None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.process.wait(timeout)
        _running.discard(self)

    def tail(self, lines: int = 80) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"

    def __enter__(self) -> DaphneProcess:
        return self

    def __exit__(self, *exc_info) -> None:
        self.stop()

    # --- HTTP ----------------------------------------------------------------------------------

    def request(
        self, method: str, path: str, *, token: str | None = None, body: Any = None, timeout: float = 10
    ) -> tuple[int, Any]:
        """(status, parsed JSON body or None) of one HTTP request to this server. Blocking: await it in a thread."""
        headers = {"Accept": "application/json"}
        data = None
        if token:
            headers["Authorization"] = f"Bearer {token}"
        if body is not None:
            data = json.dumps(body).encode()
            headers["Content-Type"] = "application/json"
        request = urllib.request.Request(self.http_url + path, data=data, headers=headers, method=method)  # noqa: S310
        try:
            with urllib.request.urlopen(request, timeout=timeout) as response:  # noqa: S310 - http://127.0.0.1 only
                status, raw = response.status, response.read()
        except urllib.error.HTTPError as exc:
            status, raw = exc.code, exc.read()
        try:
            return status, json.loads(raw) if raw else None
        except ValueError:
            return status, raw.decode(errors="replace")

    def get_json(self, path: str, token: str | None = None) -> Any:
        status, body = self.request("GET", path, token=token)
        assert status == 200, (status, body)
        return body


class WorkerProcess(DaphneProcess):
    """The background worker of slow tools (`manage.py db_worker`); `preload`: modules to import, or
    `module:function` to call, before it starts."""

    def __repr__(self) -> str:
        return f"<WorkerProcess {self.name} pid={self.pid}>"

    def command(self) -> list[str]:
        worker_args = ["--queue-name", "tools", "--interval", "0.1", "--no-startup-delay", "--no-reload"]
        return [sys.executable, "-c", _WORKER_BOOT, ",".join(self.preload), *worker_args]

    def wait_ready(self, timeout: float = READY_TIMEOUT) -> WorkerProcess:
        deadline = time.monotonic() + timeout
        while "Starting worker" not in self.tail(200):
            if not self.running():
                raise DaphneStartError(f"{self} exited with {self.process and self.process.returncode}:\n{self.tail()}")
            if time.monotonic() > deadline:
                self.kill()
                raise DaphneStartError(f"{self} did not start within {timeout:g} s:\n{self.tail()}")
            time.sleep(0.05)
        return self


def start_worker(
    env_overrides: dict[str, str] | None = None, *, preload=(), log_dir: Path | str | None = None, name: str = "worker"
) -> WorkerProcess:
    """A background worker on the test database, started and ready to take jobs."""
    worker = WorkerProcess(server_env(env_overrides), preload=preload, log_dir=log_dir, name=name)
    worker.spawn()
    return worker.wait_ready()


def _launch(processes: list[DaphneProcess], timeout: float, attempts: int = 3) -> None:
    """Spawn all, then wait for all; a process that lost its port to someone else is started again."""
    for process in processes:
        process.spawn()
    for process in processes:
        for attempt in range(attempts):
            try:
                process.wait_ready(timeout)
                break
            except DaphneStartError:
                if attempt + 1 == attempts or "in use" not in process.tail(20):
                    stop_all(processes)
                    raise
                process.spawn()


def start_daphne(
    env_overrides: dict[str, str] | None = None,
    *,
    llm=None,
    preload=(),
    log_dir: Path | str | None = None,
    name: str = "daphne",
    timeout: float = READY_TIMEOUT,
) -> DaphneProcess:
    """One daphne process, accepting connections. `llm`: a FakeLLM (or its base URL) to answer as provider."""
    process = DaphneProcess(server_env(env_overrides, llm=llm), preload=preload, log_dir=log_dir, name=name)
    _launch([process], timeout)
    return process


def start_daphnes(
    count: int,
    env_overrides: dict[str, str] | None = None,
    *,
    llm=None,
    preload=(),
    log_dir: Path | str | None = None,
    timeout: float = READY_TIMEOUT,
) -> list[DaphneProcess]:
    """`count` daphne processes sharing database, channel layer and settings, started side by side."""
    env = server_env(env_overrides, llm=llm)
    processes = [
        DaphneProcess(env, preload=preload, log_dir=log_dir, name=f"daphne-{chr(ord('a') + index)}")
        for index in range(count)
    ]
    _launch(processes, timeout)
    return processes


def stop_all(processes=None) -> None:
    for process in list(_running if processes is None else processes):
        process.stop()


# A test run that dies without running its finalizers still leaves no server behind.
atexit.register(stop_all)


class RemoteSocket:
    """A WebSocket to a server process, speaking the chat protocol's JSON frames."""

    def __init__(self, connection: ClientConnection):
        self.connection = connection
        self.ready: dict[str, Any] | None = None

    @classmethod
    async def open(
        cls,
        server: DaphneProcess,
        path: str,
        *,
        token: str | None = None,
        origin: str | None = None,
        ready: bool = True,
        timeout: float = 10,
    ) -> RemoteSocket:
        """Connect; with a token, authenticate with the first frame; with `ready`, wait for the `ready` frame."""
        connection = await connect(server.ws_url(path), origin=origin or server.origin, open_timeout=timeout)
        remote = cls(connection)
        try:
            if token is not None:
                await remote.send({"type": "auth", "token": token})
            if ready:
                frame = await remote.receive(timeout)
                assert frame["type"] == "ready", frame
                remote.ready = frame
        except BaseException:
            await remote.close()
            raise
        return remote

    async def send(self, frame: dict[str, Any]) -> None:
        await self.connection.send(json.dumps(frame))

    async def receive(self, timeout: float = 10) -> dict[str, Any]:
        async with asyncio.timeout(timeout):
            return json.loads(await self.connection.recv())

    async def receive_until(self, kind: str, timeout: float = 10, **match) -> list[dict[str, Any]]:
        """Every frame up to and including the first of type `kind` whose fields match."""
        frames = []
        async with asyncio.timeout(timeout):
            while True:
                frame = json.loads(await self.connection.recv())
                frames.append(frame)
                if frame["type"] == kind and all(frame.get(key) == value for key, value in match.items()):
                    return frames

    async def close(self) -> None:
        with contextlib.suppress(ConnectionClosed, OSError, TimeoutError):
            await asyncio.wait_for(self.connection.close(), 2)
