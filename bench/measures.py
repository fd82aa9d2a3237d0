"""What `make bench` makes of the streams: percentiles, database writes and idle sockets."""

from __future__ import annotations

import asyncio
import time
from typing import Any

from .checks import MIN_P99_SAMPLES, percentile
from .clients import StreamResult, close_sockets, open_sockets
from .stack import Stack, rss_kb


def summarize(rounds: list[list[StreamResult]]) -> dict[str, Any]:
    """The figures of one leg of a level: `rounds` of concurrent streams, one round after the other.

    The 99th percentile is given only from MIN_P99_SAMPLES first tokens up: `ttft_samples` says how many there were.
    """
    results = [result for one_round in rounds for result in one_round]
    ttfts = [r.ttft * 1000 for r in results if r.ttft is not None]
    echoes = [(r.echo - r.sent) * 1000 for r in results if r.echo is not None]
    starts = [(r.run_started - r.sent) * 1000 for r in results if r.run_started is not None]
    failed = [r for r in results if r.error or r.status != "completed"]
    # A run that failed, or that the client gave up on, is missing its tail: "undelivered", not "lost".
    done = [r for r in results if r.finished is not None and r.status == "completed" and r.integrity]
    cut = [r for r in results if r not in done and r.integrity]
    broken = [r for r in done if not r.integrity.ok] + [
        r
        for r in cut
        if r.integrity.duplicated or r.integrity.reordered or r.integrity.foreign or r.integrity.seq_problems
    ]
    return {
        "streams": len(rounds[0]) if rounds else 0,
        "rounds": len(rounds),
        "runs": len(results),
        "completed": len(results) - len(failed),
        "ttft_samples": len(ttfts),
        "ttft_p50_ms": percentile(ttfts, 50),
        "ttft_p99_ms": percentile(ttfts, 99) if len(ttfts) >= MIN_P99_SAMPLES else None,
        "ttft_max_ms": max(ttfts) if ttfts else None,
        # Where AgentChat's time to first token goes: the echo of the stored message, then run_started.
        "echo_p50_ms": percentile(echoes, 50),
        "run_started_p50_ms": percentile(starts, 50),
        "tokens": sum(r.integrity.received for r in results if r.integrity),
        "frames": sum(r.frames for r in results),
        "streaming_s_mean": sum(r.streaming for r in results) / len(results) if results else 0.0,
        "lost": sum(r.integrity.lost for r in done),
        "unfinished": len(cut),  # failed, or not finished when the client gave up
        "undelivered": sum(r.integrity.lost for r in cut),
        "duplicated": sum(r.integrity.duplicated for r in results if r.integrity),
        "reordered": sum(r.integrity.reordered for r in results if r.integrity),
        "foreign": sum(r.integrity.foreign for r in results if r.integrity),
        "seq_problems": sum(r.integrity.seq_problems for r in results if r.integrity),
        "streams_with_integrity_problems": len(broken),
        "errors": sorted({r.error or f"status {r.status!r}" for r in failed})[:5],
        "per_stream": [_detail(r) for r in results],
    }


def _detail(result: StreamResult) -> dict[str, Any]:
    """One stream, compactly: when its first token came, how long it streamed, what it lacked."""
    integrity = result.integrity
    return {
        "ttft_ms": round(result.ttft * 1000, 1) if result.ttft is not None else None,
        "streaming_s": round(result.streaming, 3),
        "frames": result.frames,
        "status": result.status,
        "error": result.error,
        "received": integrity.received if integrity else 0,
        "lost": integrity.lost if integrity else None,
        "duplicated": integrity.duplicated if integrity else None,
        "reordered": integrity.reordered if integrity else None,
        "seq_problems": integrity.seq_problems if integrity else None,
    }


def total_writes(stack: Stack) -> dict[str, int]:
    merged: dict[str, int] = {}
    for server in stack.servers:
        for key, value in server.counts()["by_statement"].items():
            merged[key] = merged.get(key, 0) + value
    return merged


def collector_passes(stack: Stack) -> dict[str, list[list[float]]]:
    """Each server's collector passes so far, [generation, ms] each."""
    return {server.name: server.counts()["collections"] for server in stack.servers}


def collector_summary(passes: dict[str, list[list[float]]], before: dict[str, list[list[float]]]) -> dict[str, Any]:
    """The servers' passes since `before` (their lists then), together: how many of each generation, their
    milliseconds in all, the longest."""
    every = [one for name, listed in passes.items() for one in listed[len(before.get(name, ())) :]]
    return {
        "passes_by_generation": [sum(1 for generation, _ in every if generation == g) for g in range(3)],
        "ms": sum(ms for _, ms in every),
        "longest_ms": max((ms for _, ms in every), default=0.0),
    }


async def settled_writes(stack: Stack, quiet: float = 0.3, limit: float = 10) -> dict[str, int]:
    """The write counts once they stopped moving (a run's last audit row follows its run_finished)."""
    deadline = time.monotonic() + limit
    before = await asyncio.to_thread(total_writes, stack)
    while time.monotonic() < deadline:
        await asyncio.sleep(quiet)
        after = await asyncio.to_thread(total_writes, stack)
        if after == before:
            break
        before = after
    return before


def difference(after: dict[str, int], before: dict[str, int]) -> dict[str, int]:
    keys = set(after) | set(before)
    return {
        key: after.get(key, 0) - before.get(key, 0) for key in sorted(keys) if after.get(key, 0) != before.get(key, 0)
    }


async def idle_sockets(stack: Stack, conversations: list[str], token: str, count: int) -> dict[str, Any]:
    """RSS growth of one process per idle authenticated socket."""
    server = stack.servers[0]
    warm = await open_sockets([server], conversations[:10], token)
    await close_sockets(warm)
    await asyncio.sleep(1.0)
    before = rss_kb(server.pid)
    started = time.perf_counter()
    targets = [conversations[index % len(conversations)] for index in range(count)]
    sockets = await open_sockets([server], targets, token, tolerate=True)
    opened = time.perf_counter() - started
    await asyncio.sleep(1.0)
    after = rss_kb(server.pid)
    await close_sockets(sockets)
    failed = [ws for ws in sockets if isinstance(ws, BaseException)]
    alive = len(sockets) - len(failed)
    return {
        "sockets": alive,
        "failed": len(failed),
        "first_failure": repr(failed[0])[:300] if failed else "",
        "process": server.name,
        "rss_before_mb": before / 1024,
        "rss_after_mb": after / 1024,
        "per_socket_kb": (after - before) / alive if alive else None,
        "open_and_auth_s": opened,
    }
