"""A TCP proxy on 127.0.0.1 in front of a real server, which a test can cut to make that server unreachable.

    with TCPProxy(("127.0.0.1", 5432)) as proxy:
        ... point a client at proxy.port ...
        proxy.cut()      # every open connection dropped, every new one reset at once
        proxy.hang()     # connections stay open, and nothing goes through them: a server that stopped answering
        proxy.restore()  # connections go through again

Threads, not asyncio: the proxy keeps forwarding whatever the test's own event loop is doing.
"""

from __future__ import annotations

import contextlib
import socket
import struct
import threading

BUFFER = 65536


def _reset(connection: socket.socket) -> None:
    """Close with a RST rather than a FIN: the peer's next read or write fails at once."""
    with contextlib.suppress(OSError):
        connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    with contextlib.suppress(OSError):
        connection.close()


class TCPProxy:
    def __init__(self, upstream: tuple[str, int], host: str = "127.0.0.1"):
        self.upstream = upstream
        self.host = host
        self.port = 0
        self._cut = threading.Event()
        self._flowing = threading.Event()
        self._flowing.set()
        self._stopping = threading.Event()
        self._lock = threading.Lock()
        self._pairs: set[tuple[socket.socket, socket.socket]] = set()
        self._listener: socket.socket | None = None
        self._thread: threading.Thread | None = None

    def start(self) -> TCPProxy:
        listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind((self.host, 0))
        listener.listen(64)
        listener.settimeout(0.05)
        self._listener, self.port = listener, listener.getsockname()[1]
        self._thread = threading.Thread(target=self._accept, name=f"proxy :{self.port}", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stopping.set()
        self._flowing.set()
        self._drop_all()
        if self._thread is not None:
            self._thread.join(timeout=2)
        if self._listener is not None:
            self._listener.close()
        self._listener = self._thread = None

    def cut(self) -> None:
        """Drop every open connection and reset every new one until `restore()`."""
        self._cut.set()
        self._drop_all()

    def hang(self) -> None:
        """Hold whatever either side sends until `restore()`."""
        self._flowing.clear()

    def restore(self) -> None:
        self._cut.clear()
        self._flowing.set()

    def __enter__(self) -> TCPProxy:
        return self.start()

    def __exit__(self, *exc_info) -> None:
        self.stop()

    def _accept(self) -> None:
        while not self._stopping.is_set():
            try:
                client, _ = self._listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            if self._cut.is_set():
                _reset(client)
                continue
            try:
                server = socket.create_connection(self.upstream, timeout=5)
            except OSError:
                _reset(client)
                continue
            client.settimeout(None)
            server.settimeout(None)
            pair = (client, server)
            with self._lock:
                self._pairs.add(pair)
            for source, target in (pair, pair[::-1]):
                threading.Thread(target=self._pump, args=(source, target, pair), daemon=True).start()

    def _pump(self, source: socket.socket, target: socket.socket, pair) -> None:
        try:
            while data := source.recv(BUFFER):
                self._flowing.wait()
                target.sendall(data)
        except OSError:
            pass
        self._drop(pair)

    def _drop(self, pair) -> None:
        with self._lock:
            if pair not in self._pairs:
                return
            self._pairs.discard(pair)
        for connection in pair:
            with contextlib.suppress(OSError):
                connection.shutdown(socket.SHUT_RDWR)
            _reset(connection)

    def _drop_all(self) -> None:
        with self._lock:
            pairs = list(self._pairs)
        for pair in pairs:
            self._drop(pair)
