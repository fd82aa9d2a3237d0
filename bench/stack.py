"""The bench's process tree: the fake provider, the database, the daphne processes; their memory and CPU."""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import secrets
import select
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

BASE_DIR = Path(__file__).resolve().parent.parent
HOST = "127.0.0.1"
BENCH_USER = "bench"
# Where the scaled setup looks when DATABASE_URL and REDIS_URL are not set (CI's services). Redis database 1,
# not 0: a test run on the same Redis meanwhile keeps its counters and groups to itself.
LOOPBACK_POSTGRES = f"postgres://postgres@{HOST}:5432/postgres"
LOOPBACK_REDIS = f"redis://{HOST}:6379/1"


def log(message: str) -> None:
    print(f"[bench {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind((HOST, 0))
        return probe.getsockname()[1]


def answers(port: int) -> bool:
    with contextlib.suppress(OSError), socket.create_connection((HOST, port), timeout=1):
        return True
    return False


def rss_kb(pid: int, field_name: str = "VmRSS") -> int:
    """Resident memory of a process in KiB (VmRSS now, VmHWM its peak), from /proc."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith(field_name + ":"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


def cpu_seconds(pid: int) -> float:
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return 0.0


class Child:
    """A process of the bench's tree, its output in a log file."""

    def __init__(self, name: str, command: list[str], env: dict[str, str], log_dir: Path, stdout_pipe=False):
        self.name = name
        self.log_path = log_dir / f"{name}.log"
        self._log = open(self.log_path, "ab")  # noqa: SIM115 - closed in stop()
        self.process = subprocess.Popen(  # noqa: S603 - our own interpreter and arguments
            command,
            cwd=BASE_DIR,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE if stdout_pipe else self._log,
            stderr=self._log,
        )

    @property
    def pid(self) -> int:
        return self.process.pid

    def running(self) -> bool:
        return self.process.poll() is None

    def tail(self, lines: int = 30) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"

    def stop(self, timeout: float = 5) -> None:
        if self.running():
            self.process.terminate()
            try:
                self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout)
        self._log.close()


class Server(Child):
    def __init__(self, name: str, env: dict[str, str], log_dir: Path):
        self.port = free_port()
        self.counts_file = log_dir / f"{name}.counts.json"
        env = {**env, "BENCH_COUNTS_FILE": str(self.counts_file)}
        command = [sys.executable, "-m", "bench.server", "serve", "-b", HOST, "-p", str(self.port)]
        super().__init__(name, [*command, "agentchat.asgi:application"], env, log_dir)

    @property
    def http_url(self) -> str:
        return f"http://{HOST}:{self.port}"

    def ws_url(self, path: str) -> str:
        return f"ws://{HOST}:{self.port}{path}"

    def wait_ready(self, timeout: float = 30) -> None:
        deadline = time.monotonic() + timeout
        while True:
            if not self.running():
                raise RuntimeError(f"{self.name} exited:\n{self.tail()}")
            with contextlib.suppress(OSError), socket.create_connection((HOST, self.port), timeout=0.5):
                return
            if time.monotonic() > deadline:
                raise RuntimeError(f"{self.name} did not listen within {timeout:g} s:\n{self.tail()}")
            time.sleep(0.05)

    def counts(self, timeout: float = 5) -> dict[str, Any]:
        """Ask the process for its counts so far (SIGUSR1; bench/server.py answers): its write statements by kind and
        table (`by_statement`) and its collector's passes (`collections`, [generation, ms] each)."""
        with contextlib.suppress(FileNotFoundError):
            self.counts_file.unlink()
        os.kill(self.pid, signal.SIGUSR1)
        deadline = time.monotonic() + timeout
        while not self.counts_file.exists():
            if time.monotonic() > deadline or not self.running():
                raise RuntimeError(f"{self.name} did not report its counts:\n{self.tail()}")
            time.sleep(0.01)
        return json.loads(self.counts_file.read_text())


class MemorySampler(threading.Thread):
    """RSS of the server processes every 50 ms; `peak()` since the last `reset()`."""

    def __init__(self, servers: list[Server]):
        super().__init__(daemon=True)
        self.servers = servers
        self.peaks = {server.name: 0 for server in servers}
        self.stopping = threading.Event()

    def run(self) -> None:
        while not self.stopping.wait(0.05):
            for server in self.servers:
                self.peaks[server.name] = max(self.peaks[server.name], rss_kb(server.pid))

    def reset(self) -> None:
        self.peaks = {server.name: rss_kb(server.pid) for server in self.servers}

    def peak(self) -> dict[str, int]:
        return dict(self.peaks)


@dataclass(frozen=True)
class Setup:
    """What to serve AgentChat on: SQLite and one process, or PostgreSQL, Redis and several processes."""

    name: str  # "sqlite" or "scaled"
    processes: int = 1
    database_url: str = ""  # the PostgreSQL server a throwaway database is made on
    redis_url: str = ""

    @property
    def mode(self) -> str:
        if self.name == "sqlite":
            return "SQLite + in-memory channel layer, 1 daphne process"
        return f"PostgreSQL + Redis, {self.processes} daphne processes"


def scaled_setup(processes: int) -> Setup | None:
    """PostgreSQL and Redis from DATABASE_URL and REDIS_URL, or on their usual loopback ports; None without."""
    database_url, redis_url = os.environ.get("DATABASE_URL", ""), os.environ.get("REDIS_URL", "")
    if not (database_url and redis_url):
        if not (answers(5432) and answers(6379)):
            return None
        database_url, redis_url = LOOPBACK_POSTGRES, LOOPBACK_REDIS
    return Setup("scaled", processes, database_url, redis_url)


@dataclass
class Stack:
    """The fake provider, the database and the daphne processes, and how to reach them."""

    work_dir: Path
    provider: Child
    provider_url: str
    servers: list[Server]
    mode: str
    password: str
    drop_database: Any = None
    children: list[Child] = field(default_factory=list)

    def stop(self) -> None:
        for child in reversed(self.children):
            child.stop()
        if self.drop_database is not None:
            self.drop_database()


def start_provider(args: argparse.Namespace, log_dir: Path) -> tuple[Child, str]:
    command = [sys.executable, "-m", "bench.fake_provider", "--port", "0"]
    ttft = "{:g}-{:g}".format(*args.ttft_ms)
    command += ["--ttft-ms", ttft, "--rate", str(args.rate), "--tick-ms", str(args.tick_ms)]
    child = Child("fake-provider", command, dict(os.environ), log_dir, stdout_pipe=True)
    ready, _, _ = select.select([child.process.stdout], [], [], 15)
    if not ready:
        child.stop()
        raise RuntimeError(f"the fake provider did not start:\n{child.tail()}")
    port = json.loads(child.process.stdout.readline())["port"]
    return child, f"http://{HOST}:{port}/v1"


def throwaway_postgres(url: str, suffix: str = "") -> tuple[str, Any]:
    """A new database on the server DATABASE_URL names, and a function that drops it."""
    import psycopg

    name = f"agentchat_bench_{os.getpid()}{suffix}"
    with psycopg.connect(url, autocommit=True) as admin:
        admin.execute(f'DROP DATABASE IF EXISTS "{name}"')
        admin.execute(f'CREATE DATABASE "{name}"')
    parts = urlsplit(url)

    def drop() -> None:
        with contextlib.suppress(Exception), psycopg.connect(url, autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')

    return urlunsplit(parts._replace(path=f"/{name}")), drop


def start_stack(args: argparse.Namespace, setup: Setup) -> Stack:
    work_dir = BASE_DIR / "var" / f"bench-{os.getpid()}-{setup.name}"
    work_dir.mkdir(parents=True, exist_ok=True)
    drop = None
    if setup.name == "scaled":
        database_url, drop = throwaway_postgres(setup.database_url)
    else:
        database_url = f"sqlite:///{work_dir / 'bench.sqlite3'}"
    provider, provider_url = start_provider(args, work_dir)
    password = secrets.token_urlsafe(16)
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "agentchat.settings",
        "DATABASE_URL": database_url,
        "SECRET_KEY": secrets.token_urlsafe(50),
        "LLM_PROVIDER": "openai-compatible",
        "LLM_MODEL": "bench-model",
        "LLM_API_KEY": "sk-bench-not-a-secret",
        "LLM_BASE_URL": provider_url,
        "LLM_TIMEOUT": "120",
        # One bench user sends every stream's message and holds every socket: the per-user limits would stop it.
        "WS_MESSAGES_PER_MINUTE": "1000000",
        "WS_SOCKETS_PER_USER": "1000000",
        "BENCH_MEDIA_ROOT": str(work_dir / "media"),
        "BENCH_USER": BENCH_USER,
        "BENCH_PASSWORD": password,
        "PYTHONUNBUFFERED": "1",
    }
    if setup.redis_url:
        env["REDIS_URL"] = setup.redis_url
    else:
        env.pop("REDIS_URL", None)
    stack = Stack(work_dir, provider, provider_url, [], setup.mode, password, drop, children=[provider])
    try:
        prepared = subprocess.run(
            [sys.executable, "-m", "bench.server", "prepare"],
            cwd=BASE_DIR,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        if prepared.returncode:
            raise RuntimeError(f"preparing the bench database failed:\n{prepared.stdout}{prepared.stderr}")
        for index in range(setup.processes):
            server = Server(f"daphne-{chr(ord('a') + index)}", env, work_dir)
            stack.servers.append(server)
            stack.children.append(server)
        for server in stack.servers:
            server.wait_ready()
    except BaseException:
        stack.stop()
        raise
    return stack


class Profile:
    """py-spy attached to one daphne process for the duration of one level."""

    RATE = 250  # samples per second per thread, while it runs (idle threads are not sampled)

    def __init__(self, pid: int, output: Path, log_dir: Path):
        self.pid, self.output, self.log_dir = pid, output, log_dir
        self.child: Child | None = None
        self.seconds = 0.0
        self._started = 0.0
        self.py_spy = shutil.which("py-spy", path=str(Path(sys.executable).parent)) or shutil.which("py-spy")

    def start(self) -> None:
        if not self.py_spy:
            log("py-spy is not installed: no profile")
            return
        command = [self.py_spy, "record", "--pid", str(self.pid), "--rate", str(self.RATE), "--format", "raw"]
        command += ["--threads", "--nonblocking", "--output", str(self.output)]
        self.child = Child("py-spy", command, dict(os.environ), self.log_dir)
        time.sleep(1.0)  # attaching takes a moment
        self._started = time.monotonic()

    def stop(self) -> None:
        if self.child is None:
            return
        self.seconds = time.monotonic() - self._started
        self.child.process.send_signal(signal.SIGINT)
        try:
            self.child.process.wait(15)
        except subprocess.TimeoutExpired:
            self.child.stop()
