"""The single-process channel layer: what Channels' in-memory layer promises, at a cost that does not grow with
the number of sockets."""

from __future__ import annotations

import asyncio

from agentchat.layers import LocalChannelLayer


async def test_a_group_message_reaches_every_member_once_and_no_one_else():
    layer = LocalChannelLayer(capacity=10)
    a, b, other = [await layer.new_channel() for _ in range(3)]
    await layer.group_add("chat.1", a)
    await layer.group_add("chat.1", b)
    await layer.group_add("chat.2", other)

    await layer.group_send("chat.1", {"type": "run.event", "seq": 1})
    await layer.group_send("chat.1", {"type": "run.event", "seq": 2})

    assert [(await layer.receive(a))["seq"] for _ in range(2)] == [1, 2]
    assert [(await layer.receive(b))["seq"] for _ in range(2)] == [1, 2]
    assert other not in layer.channels


async def test_a_member_that_fell_behind_loses_messages_not_the_sender():
    layer = LocalChannelLayer(capacity=2)
    slow, fast = await layer.new_channel(), await layer.new_channel()
    await layer.group_add("chat.1", slow)
    await layer.group_add("chat.1", fast)

    for seq in range(3):
        await layer.group_send("chat.1", {"type": "run.event", "seq": seq})
        await layer.receive(fast)

    assert [(await layer.receive(slow))["seq"] for _ in range(2)] == [0, 1]


async def test_a_waiting_receiver_gets_a_group_message_sent_later():
    layer = LocalChannelLayer()
    channel = await layer.new_channel()
    await layer.group_add("chat.1", channel)
    waiting = asyncio.create_task(layer.receive(channel))
    await asyncio.sleep(0)

    await layer.group_send("chat.1", {"type": "run.event", "seq": 1})

    assert (await asyncio.wait_for(waiting, 1))["seq"] == 1


async def test_expired_messages_and_their_channels_are_swept(monkeypatch):
    layer = LocalChannelLayer(expiry=60)
    gone = await layer.new_channel()
    await layer.group_add("chat.1", gone)
    await layer.group_send("chat.1", {"type": "run.event", "seq": 1})
    monkeypatch.setattr("agentchat.layers.time.time", lambda: 10**10)
    layer.swept = 0.0

    await layer.group_send("chat.2", {"type": "run.event", "seq": 2})

    assert gone not in layer.channels and gone not in layer.groups["chat.1"]
