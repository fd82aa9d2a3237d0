"""The configured channel layer really carries messages: in-memory locally, Redis when REDIS_URL is set."""

from __future__ import annotations

import asyncio
import uuid

from channels.layers import get_channel_layer

TIMEOUT = 5


async def test_send_and_receive_round_trip():
    layer = get_channel_layer()
    channel = await layer.new_channel()
    message = {"type": "test.message", "text": f"hello {uuid.uuid4().hex}"}

    await layer.send(channel, message)

    assert await asyncio.wait_for(layer.receive(channel), TIMEOUT) == message


async def test_group_send_reaches_every_member_and_not_the_removed_one():
    layer = get_channel_layer()
    group = f"test-group-{uuid.uuid4().hex}"
    first, second, removed = [await layer.new_channel() for _ in range(3)]
    for channel in (first, second, removed):
        await layer.group_add(group, channel)
    await layer.group_discard(group, removed)
    message = {"type": "test.event", "n": 1}

    await layer.group_send(group, message)

    assert await asyncio.wait_for(layer.receive(first), TIMEOUT) == message
    assert await asyncio.wait_for(layer.receive(second), TIMEOUT) == message
    # The removed channel got nothing: the next thing it receives is a direct message sent after.
    marker = {"type": "test.marker"}
    await layer.send(removed, marker)
    assert await asyncio.wait_for(layer.receive(removed), TIMEOUT) == marker
    for channel in (first, second):
        await layer.group_discard(group, channel)
