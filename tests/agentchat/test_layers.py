"""The channel layers: the single-process one keeps what Channels' in-memory layer promises, at a cost that does
not grow with the number of sockets; the Redis one tells its receivers when the connection to Redis was lost."""

from __future__ import annotations

import asyncio
import uuid
from types import SimpleNamespace

import pytest
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff

from agentchat.layers import LocalChannelLayer, RedisChannelLayer, RedisLost
from conversations.runs.control import ControlPlane
from conversations.runs.live import LiveRun

TIMEOUT = 5


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


def redis_host(url: str) -> dict:
    """As settings.py configures it: a pooled connection that a restart broke is replaced at once."""
    return {"address": url, "retry": Retry(NoBackoff(), 1)}


async def test_redis_lost_fails_every_waiting_receive_and_redis_back_carries_messages_again(private_redis):
    layer = RedisChannelLayer(hosts=[redis_host(private_redis.url)])
    socket, run = await layer.new_channel(), await layer.new_channel()
    await layer.group_add("chat.1", socket)
    await layer.group_send("chat.1", {"type": "run.event", "seq": 1})
    assert (await asyncio.wait_for(layer.receive(socket), TIMEOUT))["seq"] == 1

    waiting = [asyncio.create_task(layer.receive(channel)) for channel in (socket, run)]
    await asyncio.to_thread(private_redis.kill)
    for receive in waiting:
        with pytest.raises(RedisLost):  # not a wait for messages that were published while it was gone
            await asyncio.wait_for(receive, TIMEOUT)

    await asyncio.to_thread(private_redis.start)
    reconnected = await layer.new_channel()
    await layer.group_add("chat.1", reconnected)
    await layer.group_send("chat.1", {"type": "run.event", "seq": 2})
    assert (await asyncio.wait_for(layer.receive(reconnected), TIMEOUT))["seq"] == 2
    await layer.flush()


async def test_a_restart_between_two_reads_fails_the_waiting_receive_too(private_redis):
    layer = RedisChannelLayer(hosts=[redis_host(private_redis.url)])
    channel = await layer.new_channel()
    await layer.send(channel, {"type": "run.event", "seq": 1})
    assert (await asyncio.wait_for(layer.receive(channel), TIMEOUT))["seq"] == 1
    waiting = asyncio.create_task(layer.receive(channel))

    await asyncio.to_thread(private_redis.kill)
    await asyncio.to_thread(private_redis.start)  # redis-py may connect again before its next read fails

    with pytest.raises(RedisLost):
        await asyncio.wait_for(waiting, TIMEOUT)
    await layer.flush()


async def test_a_run_still_hears_a_cancel_after_redis_was_lost(private_redis, settings):
    layer = {"BACKEND": "agentchat.layers.RedisChannelLayer", "CONFIG": {"hosts": [redis_host(private_redis.url)]}}
    settings.CHANNEL_LAYERS = {"default": layer}
    plane = ControlPlane()
    run = LiveRun(run_id="run-1", conversation=SimpleNamespace(pk=uuid.uuid4()), user=None)
    run.task = asyncio.create_task(asyncio.sleep(60))
    await plane.open(run)
    listener = asyncio.create_task(plane.listen(run))

    await asyncio.to_thread(private_redis.kill)
    await asyncio.sleep(1)  # down for a while, not only between two reads
    await asyncio.to_thread(private_redis.start)

    # As a person presses Stop again: a cancel sent while the listener is joining its group again is not heard.
    for _ in range(25):
        await plane.cancel(run.conversation)
        await asyncio.wait([run.task], timeout=0.2)
        if run.task.done():
            break
    assert run.task.cancelled()
    await plane.stop_listening(run, listener)
    assert listener.done()
