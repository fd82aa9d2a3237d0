"""A private redis-server on a free port of 127.0.0.1, which a test may kill and start again.

    redis = RedisServer(log_dir=tmp_path).start()
    try:
        ... REDIS_URL=redis.url ...
        redis.kill()   # SIGKILL: as in a crash, nothing kept (no RDB, no AOF)
        redis.start()  # the same port, empty
    finally:
        redis.stop()

Never the shared Redis on 6379: killing that would break every other test using it.
"""

from __future__ import annotations

import contextlib
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path

from tests.servers import HOST, free_port

READY_TIMEOUT = 10.0


def redis_server_binary() -> str | None:
    return shutil.which("redis-server") or next(
        (path for path in ("/usr/bin/redis-server", "/usr/local/bin/redis-server") if Path(path).exists()), None
    )


class RedisServer:
    def __init__(self, *, log_dir: Path | str | None = None, port: int | None = None):
        binary = redis_server_binary()
        if binary is None:
            raise RuntimeError("redis-server is not installed")
        self.binary = binary
        self.port = port or free_port()
        self.log_dir = Path(log_dir) if log_dir is not None else Path(tempfile.mkdtemp(prefix="redis-"))
        self.log_path = self.log_dir / f"redis-{self.port}.log"
        self.process: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"redis://{HOST}:{self.port}/0"

    def start(self, timeout: float = READY_TIMEOUT) -> RedisServer:
        self.log_dir.mkdir(parents=True, exist_ok=True)
        command = [
            self.binary,
            "--port", str(self.port),
            "--bind", HOST,
            "--save", "",
            "--appendonly", "no",
            "--dir", str(self.log_dir),
            "--logfile", str(self.log_path),
        ]  # fmt: skip
        self.process = subprocess.Popen(  # noqa: S603 - the machine's redis-server with our own arguments
            command, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        deadline = time.monotonic() + timeout
        while not self.ping():
            if self.process.poll() is not None:
                raise RuntimeError(f"redis-server exited with {self.process.returncode}:\n{self.tail()}")
            if time.monotonic() > deadline:
                self.kill()
                raise RuntimeError(f"redis-server did not answer within {timeout:g} s:\n{self.tail()}")
            time.sleep(0.02)
        return self

    def ping(self) -> bool:
        with contextlib.suppress(OSError), socket.create_connection((HOST, self.port), timeout=0.5) as connection:
            connection.sendall(b"PING\r\n")
            return connection.recv(16).startswith(b"+PONG")
        return False

    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def kill(self) -> None:
        if self.running():
            with contextlib.suppress(ProcessLookupError):
                self.process.send_signal(signal.SIGKILL)
        if self.process is not None:
            self.process.wait(5)

    def stop(self) -> None:
        if self.running():
            self.process.terminate()
            try:
                self.process.wait(5)
            except subprocess.TimeoutExpired:
                self.kill()

    def tail(self, lines: int = 40) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"
