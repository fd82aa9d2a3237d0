"""`GET /healthz`: whether this process can serve, for a load balancer or an orchestrator to ask.

It answers 200 when the database and the channel layer both answer, else 503 naming what does not; nothing
about the request is needed (no sign-in), and nothing is written.
"""

from __future__ import annotations

import asyncio

from channels.db import database_sync_to_async
from channels.layers import get_channel_layer
from django.db import DatabaseError, connection
from django.http import HttpRequest, JsonResponse
from django.utils.translation import gettext_lazy as _

from agentchat.errors import ApiError

NOT_READY = {
    ("database",): _("Not ready: the database is unreachable."),
    ("channel_layer",): _("Not ready: the channel layer is unreachable."),
    ("database", "channel_layer"): _("Not ready: the database and the channel layer are unreachable."),
}
# Long enough for a busy database or Redis, short enough for a prober's own timeout.
CHECK_TIMEOUT = 3.0


@database_sync_to_async
def _database() -> None:
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1")


async def _channel_layer() -> None:
    layer = get_channel_layer()
    channel = await layer.new_channel()
    await layer.send(channel, {"type": "health.check"})
    await layer.receive(channel)


async def healthz(request: HttpRequest) -> JsonResponse:
    parts = {"database": _database, "channel_layer": _channel_layer}
    down = []
    for name, check in parts.items():
        try:
            await asyncio.wait_for(check(), CHECK_TIMEOUT)
        except (DatabaseError, OSError, TimeoutError, ConnectionError):
            down.append(name)
    state = {name: "down" if name in down else "ok" for name in parts}
    if down:
        error = ApiError(NOT_READY[tuple(down)], code="UNAVAILABLE", status_code=503, **state)
        return JsonResponse(error.body(), status=error.status_code)
    return JsonResponse({"status": "ok", **state})
