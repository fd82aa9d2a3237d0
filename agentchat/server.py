"""daphne, made safe to face the network on its own: `python -m agentchat.server <daphne's arguments>`.

As it comes, daphne (through Twisted) reads a request's whole body before the application sees any of
it, and parses form bodies on the thread that serves every socket: one large upload stalls everyone.
Here, instead:

- a request whose declared length is over its route's limit is answered 413 as soon as its headers
  are in, and one without a length is answered 413 the moment its body passes the limit; nothing more
  of it is kept, and what the client still sends is read and dropped for a short while, so that the
  client can read the answer instead of meeting a reset connection;
- Twisted parses no form body (`parsePOSTFormSubmission=False`): Django reads it, off that thread;
- a request Twisted cannot frame (a broken chunked body, a bad header line) gets the one error shape,
  not a bare "400 Bad Request";
- these refusals are worded in the reader's language, chosen from the request's head as Django would;
- the model provider gets ready before the first request: the embedded model loads in the background as the
  server starts, so that the first person to ask does not wait for it; so does the token encoding that
  fits a conversation to the context budget;
- a WebSocket message over `FRAME_READ_LIMIT` closes the socket with 1009 (autobahn, by default,
  drops the TCP connection without a close frame); a message between the protocol's 1 MiB and that
  is read, and answered `TOO_LARGE` by the consumer;
- a closed socket's objects are freed as it closes: daphne and autobahn leave some in cycles, which only the garbage
  collector's older passes would free, with every socket of the process waiting;
- a frame is sent without autobahn's debug line, which it formats for every frame whether or not it is logged.

daphne builds its factories inside `Server.run()` from the names `daphne.server.HTTPFactory` and
`daphne.server.WebSocketFactory` and offers no other way in, so `main()` puts ours under those names.
"""

from __future__ import annotations

import contextlib
import gc
import importlib
import json
import os
import sys
from functools import partial

import daphne.server
import django
from daphne.cli import CommandLineInterface
from daphne.http_protocol import HTTPFactory, WebRequest
from daphne.ws_protocol import WebSocketFactory, WebSocketProtocol
from django.conf import settings
from django.http.cookie import parse_cookie
from django.utils import translation
from twisted.web import http

from agentchat import tokens
from agentchat.agent.providers import ProviderError, warm_up
from agentchat.sentences import reader_language, translate
from conversations.api import uploads
from conversations.api.uploads import ATTACHMENTS_PATH, MULTIPART_SLACK
from tools.documents.limits import MAX_UPLOAD_BYTES, MiB

BODY_LIMIT = MiB
UPLOAD_BODY_LIMIT = MAX_UPLOAD_BYTES + MULTIPART_SLACK
# Frames up to this are read (and refused by the consumer past 1 MiB); a longer one closes the socket.
FRAME_READ_LIMIT = 4 * MiB
# How long a refused request's remaining body is read and dropped before the connection is cut.
LINGER_SECONDS = 5


def body_limit(path: bytes) -> int:
    """The most bytes a request body to `path` may have."""
    route = path.split(b"?", 1)[0].decode("latin-1")
    return UPLOAD_BODY_LIMIT if ATTACHMENTS_PATH.match(route) else BODY_LIMIT


def too_large(limit: int) -> dict:
    if limit == UPLOAD_BODY_LIMIT:
        message = uploads.too_large().message  # what the upload view says of a file over the limit
    else:
        message = f"The request body is larger than {limit // MiB} MB, the most accepted."
    return {"error": message, "code": "TOO_LARGE"}


class GuardedRequest(WebRequest):
    """Counts the body as it arrives; the channel refuses it once it passes the limit."""

    body_limit = BODY_LIMIT
    received = 0

    def handleContentChunk(self, data: bytes) -> None:
        if self.channel.refused:
            return
        self.received += len(data)
        if self.received > self.body_limit:
            self.channel.refuse(413, b"Content Too Large", too_large(self.body_limit))
            return
        super().handleContentChunk(data)

    def process(self) -> None:
        super().process()
        if self.transport is None:
            # daphne handed the connection to a WebSocket protocol, so this request and its channel will hear nothing
            # more. Holding each other, they would wait for the collector's next pass; let go, they are freed now.
            self.channel.requests.remove(self)


class GuardedChannel(http.HTTPChannel):
    """Plain HTTP/1.1: this server terminates no TLS, so there is no HTTP/2 to negotiate."""

    refused = False

    def allHeadersReceived(self) -> None:
        # `_path` is the request line's target, the only place it is known before the body is read.
        limit = body_limit(self._path)
        if self.length is not None and self.length > limit:
            self.refuse(413, b"Content Too Large", too_large(limit))
            return
        self.requests[-1].body_limit = limit
        super().allHeadersReceived()

    def dataReceived(self, data: bytes) -> None:
        if not self.refused:
            super().dataReceived(data)

    def allContentReceived(self) -> None:
        if not self.refused:
            super().allContentReceived()

    def _respondToBadRequestAndDisconnect(self) -> None:
        self.refuse(400, b"Bad Request", {"error": "The request is malformed.", "code": "INVALID"})

    def refuse(self, status: int, reason: bytes, body: dict) -> None:
        """Answer now, in the one error shape and the reader's language, and take nothing more from this
        connection."""
        if self.refused:
            return
        self.refused = True
        with translation.override(self.reader_language()):
            payload = json.dumps({**body, "error": translate(body["error"])}).encode()
        head = (
            b"HTTP/1.1 %d %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\nConnection: close\r\n\r\n"
            % (status, reason, len(payload))
        )
        self.transport.write(head + payload)
        # Half-closed, the client still reads the answer; a TLS transport offers no half-close, only a close.
        getattr(self.transport, "loseWriteConnection", self.transport.loseConnection)()
        self.setTimeout(LINGER_SECONDS)

    def reader_language(self) -> str:
        """As Django would choose it for the request being refused; a request whose head could not be read has
        none."""
        if not self.requests:
            return settings.LANGUAGE_CODE
        headers = self.requests[-1].requestHeaders
        cookie = b"; ".join(headers.getRawHeaders(b"cookie", [])).decode("latin-1")
        accept = b", ".join(headers.getRawHeaders(b"accept-language", [])).decode("latin-1")
        return reader_language(parse_cookie(cookie), accept)


class GuardedHTTPFactory(HTTPFactory):
    protocol = GuardedChannel

    def buildProtocol(self, addr):
        channel = super().buildProtocol(addr)
        channel.requestFactory = partial(GuardedRequest, parsePOSTFormSubmission=False)
        return channel


class FrugalWebSocketProtocol(WebSocketProtocol):
    def sendData(self, data: bytes, sync: bool = False, chopsize: int | None = None) -> None:
        # autobahn's own formats a debug line (coloured, with qualified names) for every frame, logged or not: four
        # fifths of the time it took to send a token's frame.
        if sync or chopsize or self.send_queue:
            super().sendData(data, sync, chopsize)
            return
        self.transport.write(data)
        if self.state == self.STATE_OPEN:
            self.trafficStats.outgoingOctetsWireLevel += len(data)

    def connectionLost(self, reason) -> None:
        super().connectionLost(reason)
        # autobahn resolves `is_closed` with the protocol itself. Kept, that cycle outlives the socket until a full pass
        # of the collector, which holds every socket of the process while it walks what closed sockets left behind.
        self.is_closed = None


class ClosingWebSocketFactory(WebSocketFactory):
    protocol = FrugalWebSocketProtocol

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.setProtocolOptions(failByDrop=False)


# The youngest generation is collected after this many more allocations than deallocations, not Python's 700:
# a burst of starts allocates that many in a millisecond or two, and every pass walks what the runs still hold and
# hands it on to the older generations, whose passes walk it again. Over a bench run of 50 and 200 streams, the
# collector's passes took about 400 ms in all at 700, the longest 33-41 ms; at 20,000, about 100 ms, the longest
# 10-24 (docs/benchmarks.md).
YOUNG_COLLECTION_THRESHOLD = 20_000


def tune_the_collector() -> None:
    """The modules, settings, URL patterns and the application live as long as the process: frozen, the garbage
    collector's full passes no longer walk their 200,000 objects, a pause of about a tenth of a second for every
    stream under load; and the young generation is collected less often (docs/benchmarks.md)."""
    importlib.import_module("agentchat.asgi")
    gc.collect()
    gc.freeze()
    gc.set_threshold(YOUNG_COLLECTION_THRESHOLD, *gc.get_threshold()[1:])


def main(argv: list[str] | None = None) -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "agentchat.settings")
    django.setup()
    # A misconfigured provider is reported to the first run that uses it, as ever.
    with contextlib.suppress(ProviderError):
        warm_up()
    tokens.warm_up()
    tune_the_collector()
    daphne.server.HTTPFactory = GuardedHTTPFactory
    daphne.server.WebSocketFactory = ClosingWebSocketFactory
    interface = CommandLineInterface()
    interface.parser.set_defaults(
        websocket_max_message_size=FRAME_READ_LIMIT, websocket_max_frame_size=FRAME_READ_LIMIT
    )
    interface.run(sys.argv[1:] if argv is None else argv)


if __name__ == "__main__":
    main()
