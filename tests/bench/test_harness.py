"""The bench harness's own parts (make bench): the fake provider's pacing, the no-loss check, the write counter."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import openai
import pytest

from bench.checks import check_stream, percentile
from bench.fake_provider import Pace, expected_text, prompt, serve, token
from bench.report import hot_spots
from bench.server import WriteCounter


@pytest.fixture
async def provider():
    ready: asyncio.Future[int] = asyncio.get_running_loop().create_future()
    server = asyncio.create_task(serve(Pace(ttft=0.05, rate=1000, tick=0.002), ready=ready.set_result))
    port = await asyncio.wait_for(ready, 5)
    yield f"http://127.0.0.1:{port}/v1"
    server.cancel()
    with pytest.raises(asyncio.CancelledError):
        await server


async def test_fake_provider_keeps_its_time_to_first_token_and_rate(provider):
    client = openai.AsyncOpenAI(api_key="sk-test", base_url=provider, max_retries=0, timeout=10)
    try:
        started = time.perf_counter()
        stream = await client.chat.completions.create(
            model="m", messages=[{"role": "user", "content": prompt("t", 100)}], stream=True
        )
        first = last = None
        deltas = []
        async for chunk in stream:
            if chunk.choices and chunk.choices[0].delta.content:
                last = time.perf_counter()
                first = first or last
                deltas.append(chunk.choices[0].delta.content)
    finally:
        await client.close()
    assert "".join(deltas) == expected_text("t", 100)
    assert 0.05 <= first - started < 1.0
    # Token 99 is due 50 ms + 99 / 1,000 s after the request: never sent sooner.
    assert last - started >= 0.149


async def test_fake_provider_serves_many_streams_at_once(provider):
    client = openai.AsyncOpenAI(api_key="sk-test", base_url=provider, max_retries=0, timeout=10)

    async def one(index: int) -> str:
        stream = await client.chat.completions.create(
            model="m", messages=[{"role": "user", "content": prompt(f"s{index}", 20)}], stream=True
        )
        return "".join([chunk.choices[0].delta.content or "" async for chunk in stream if chunk.choices])

    try:
        texts = await asyncio.gather(*(one(index) for index in range(40)))
    finally:
        await client.close()
    assert texts == [expected_text(f"s{index}", 20) for index in range(40)]


def test_check_stream_finds_nothing_wrong_in_the_scripted_text():
    result = check_stream(expected_text("a", 5), "a", 5, seqs=[1, 2, 3, 4, 5, 6, 7])
    assert result.ok and result.received == 5


def test_check_stream_counts_lost_duplicated_reordered_and_foreign_tokens():
    tokens = [token("a", index) for index in range(6)]
    assert check_stream("".join(tokens[:3] + tokens[4:]), "a", 6).lost == 1
    assert check_stream("".join(tokens + tokens[2:3]), "a", 6).duplicated == 1
    swapped = check_stream("".join([tokens[0], tokens[2], tokens[1], *tokens[3:]]), "a", 6)
    assert swapped.reordered == 1 and swapped.lost == 0 and not swapped.ok
    assert check_stream("".join(tokens) + token("b", 0), "a", 6).foreign == 1
    # Merged deltas are judged by their text: a server may batch tokens into fewer frames.
    assert check_stream("".join(tokens), "a", 6, seqs=[3, 4, 5]).ok


def test_check_stream_catches_gaps_and_repeats_in_seq():
    text = expected_text("a", 3)
    assert check_stream(text, "a", 3, seqs=[1, 2, 4]).seq_problems == 1
    assert check_stream(text, "a", 3, seqs=[1, 2, 2, 3]).seq_problems == 1
    assert check_stream(text, "a", 3, seqs=[1, 3, 2]).seq_problems == 2


def test_percentile_interpolates():
    assert percentile([], 50) is None
    assert percentile([7.0], 99) == 7.0
    assert percentile([1.0, 2.0, 3.0, 4.0], 50) == 2.5
    assert percentile(list(range(101)), 99) == 99


def test_write_counter_counts_only_statements_that_change_rows():
    counter = WriteCounter()
    for sql in (
        'INSERT INTO "conversations_message" ("content") VALUES (%s)',
        'UPDATE "conversations_message" SET "content" = %s WHERE id = %s',
        '  update "conversations_conversation" SET x = 1',
        'DELETE FROM "conversations_message" WHERE id = 1',
        'SELECT "id" FROM "conversations_message"',
        "BEGIN IMMEDIATE",
        "SAVEPOINT s1",
    ):
        counter.see(sql)
    assert counter.snapshot() == {
        "INSERT conversations_message": 1,
        "UPDATE conversations_message": 1,
        "UPDATE conversations_conversation": 1,
        "DELETE conversations_message": 1,
    }


def test_hot_spots_from_collapsed_stacks(tmp_path: Path):
    raw = tmp_path / "profile.txt"
    raw.write_text(
        "thread (0x1): MainThread;run (asyncio/base_events.py:10);_drive (conversations/runs.py:5);"
        "create_default_context (ssl.py:770) 30\n"
        "thread (0x1): MainThread;run (asyncio/base_events.py:10);_drive (conversations/runs.py:6);"
        "dumps (json/__init__.py:1) 10\n"
    )
    spots = hot_spots(raw, seconds=1.0, rate=50)
    assert spots["samples"] == 40
    assert spots["threads"] == [{"thread": "MainThread (the event loop)", "share": 1.0, "busy": 0.8}]
    assert spots["self"][0] == {"function": "create_default_context (ssl.py)", "share": 0.75}
    assert spots["product"] == [{"function": "_drive (conversations/runs.py)", "share": 1.0}]
    assert all("asyncio" not in spot["function"] for spot in spots["inclusive"])
