"""A test's own HTTP server on a free loopback port, serving from a daemon thread."""

from __future__ import annotations

import threading
from http.server import ThreadingHTTPServer
from typing import Self


class LoopbackService:
    """Start with `start()` or `with`; `stop()` wakes every handler waiting on `stopping`, then closes the server.

    Subclasses name their `server_class`, built as `server_class(self)`.
    """

    server_class: type[ThreadingHTTPServer]

    def __init__(self) -> None:
        self.stopping = threading.Event()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    @property
    def port(self) -> int:
        assert self._server is not None, f"start() the {type(self).__name__} first"
        return self._server.server_address[1]

    def start(self) -> Self:
        self._server = self.server_class(self)
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._server is None:
            return
        self.stopping.set()
        self._server.shutdown()
        self._closing(self._server)
        self._server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=2)
        self._server = self._thread = None

    def _closing(self, server: ThreadingHTTPServer) -> None:
        """What to end before the listening socket closes (e.g. streams still open)."""

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc_info) -> None:
        self.stop()
