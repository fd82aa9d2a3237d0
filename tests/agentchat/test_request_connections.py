"""An HTTP request served over ASGI closes the database connections it opened as it ends, rather than leaving
them to the garbage collector, whose passes on the event loop hold every socket up while it closes them."""

from __future__ import annotations

import gc

import pytest
from asgiref.sync import sync_to_async
from channels.testing import HttpCommunicator
from django.db.backends.base.base import BaseDatabaseWrapper
from rest_framework_simplejwt.tokens import AccessToken

from agentchat.asgi import application

pytestmark = pytest.mark.django_db(transaction=True)


def open_connections() -> int:
    """Database connections of this process still open, whether or not anything refers to them any more."""
    # type(), not isinstance(): a lazy object left by a request evaluates itself when asked for its __class__.
    wrappers = [obj for obj in gc.get_objects() if issubclass(type(obj), BaseDatabaseWrapper)]
    return sum(1 for wrapper in wrappers if wrapper.connection is not None)


async def test_a_request_leaves_no_database_connection_open_behind_it(alice):
    token = await sync_to_async(lambda: str(AccessToken.for_user(alice)))()
    headers = [(b"host", b"testserver"), (b"authorization", f"Bearer {token}".encode())]

    async def listed() -> None:
        asked = HttpCommunicator(application, "GET", "/api/assistant/conversations/", headers=headers)
        response = await asked.get_response(timeout=10)
        assert response["status"] == 200
        await asked.wait(timeout=10)  # the request's end

    await listed()
    gc.collect()
    before = open_connections()
    gc.disable()  # what the requests leave stays where the collector would find it
    try:
        for _ in range(10):
            await listed()
        assert open_connections() == before
    finally:
        gc.enable()
