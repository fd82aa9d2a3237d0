"""What the server writes to a connection (agentchat.server.WriteThroughServer): sent at once when nothing waits
before it, and otherwise after what waits, whole and in order; a connection the client reset is found lost, as
ever. A real TCP connection over loopback; the reactor only keeps the books of which connections wait to write."""

from __future__ import annotations

import select
import socket
import struct

import pytest
from twisted.internet import error
from twisted.internet.protocol import Protocol
from twisted.internet.testing import MemoryReactor

from agentchat.server import WriteThroughServer


@pytest.fixture
def connection():
    """The server's side of a connection, and the client's socket; both with small buffers, so that a megabyte
    written does not fit in them."""
    with socket.create_server(("127.0.0.1", 0)) as listener:
        client = socket.socket()
        client.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        client.connect(listener.getsockname())
        accepted, address = listener.accept()
    accepted.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4096)
    reactor = MemoryReactor()
    server = WriteThroughServer(accepted, Protocol(), address, None, 1, reactor)
    yield server, client, reactor
    client.close()
    accepted.close()


def read_waiting(client: socket.socket) -> bytes:
    """What has reached the client so far."""
    got = b""
    while select.select([client], [], [], 0)[0] and (chunk := client.recv(65536)):
        got += chunk
    return got


def test_a_write_goes_out_at_once(connection):
    server, client, reactor = connection

    server.write(b"a frame")

    assert read_waiting(client) == b"a frame"  # with no turn of the event loop
    assert server not in reactor.getWriters()


def test_what_the_socket_does_not_take_at_once_goes_first_and_whole(connection):
    server, client, reactor = connection
    large = bytes(range(256)) * 4096  # a megabyte

    server.write(large)
    assert server in reactor.getWriters()  # the rest waits for the socket
    received = read_waiting(client)
    assert 0 < len(received) < len(large)
    server.write(b"the next frame")  # the socket has room again, but it comes after what waits
    while server in reactor.getWriters():
        if select.select([], [server.socket], [], 0)[1]:
            server.doWrite()
        received += read_waiting(client)
    received += read_waiting(client)

    assert received == large + b"the next frame"


def test_a_write_to_a_connection_the_client_reset_finds_it_lost(connection):
    server, client, reactor = connection
    client.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    client.close()  # a reset, not a goodbye

    server.write(b"a frame")

    assert server in reactor.getWriters()  # the reactor's next turn finds the connection lost
    assert isinstance(server.doWrite(), error.ConnectionLost)
