"""GET /healthz: 200 when the database and the channel layer answer, 503 naming what does not."""

from __future__ import annotations

import pytest

from agentchat import health

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_healthy_process_says_so_without_a_sign_in(client):
    answer = client.get("/healthz")

    assert answer.status_code == 200
    assert answer.json() == {"status": "ok", "database": "ok", "channel_layer": "ok"}


class BrokenLayer:
    async def new_channel(self) -> str:
        return "health!x"

    async def send(self, channel, message) -> None:
        raise ConnectionError("Redis is restarting")


def test_an_unreachable_channel_layer_is_named(client, monkeypatch):
    monkeypatch.setattr(health, "get_channel_layer", BrokenLayer)

    answer = client.get("/healthz")

    assert answer.status_code == 503
    assert answer.json() == {
        "error": "Not ready: the channel layer is unreachable.",
        "code": "UNAVAILABLE",
        "database": "ok",
        "channel_layer": "down",
    }


def test_the_sentence_is_in_the_readers_language(client, monkeypatch):
    monkeypatch.setattr(health, "get_channel_layer", BrokenLayer)

    answer = client.get("/healthz", headers={"accept-language": "ru"})

    assert answer.status_code == 503
    assert answer.json()["error"] == "Не готов: слой каналов недоступен."
