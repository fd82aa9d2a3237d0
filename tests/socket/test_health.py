"""GET /healthz from a real daphne process (on PostgreSQL + Redis in CI's second pass)."""

from __future__ import annotations

import asyncio
import json
import urllib.request

import pytest

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("close_thread_connections")]


async def test_a_real_server_answers_its_health_check(daphnes):
    [server] = await asyncio.to_thread(daphnes, 1)

    def get() -> tuple[int, dict]:
        with urllib.request.urlopen(f"{server.http_url}/healthz", timeout=10) as answer:  # noqa: S310 - loopback
            return answer.status, json.loads(answer.read())

    status, body = await asyncio.to_thread(get)
    assert (status, body) == (200, {"status": "ok", "database": "ok", "channel_layer": "ok"})
