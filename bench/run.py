"""`make bench`: AgentChat streaming side by side with a direct `openai` client, measured by the clients' clocks.

One process tree: this driver starts the fake provider (bench/fake_provider.py) and the server
(bench/server.py: daphne on a throwaway SQLite file, or on a throwaway PostgreSQL database with Redis
and two daphne processes when DATABASE_URL and REDIS_URL are set), then, for each concurrency level,
N direct `openai.AsyncOpenAI` streams and N WebSocket clients (each: a conversation of its own made
over the REST API with a JWT, first-frame auth, one message, read until `run_finished`). It prints a
table and writes bench/results/bench-<time>.json and .png (and latest.json / latest.png).

    python -m bench --help
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import datetime as dt
import json
import os
import shutil
import signal
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import httpx
import openai
from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosed

from .checks import Integrity, check_stream, percentile
from .fake_provider import DEFAULT_TOKENS, add_pace_arguments, prompt
from .report import chart, hot_spots, machine, render, shown, targets
from .stack import BENCH_USER, MemorySampler, Profile, Server, Stack, cpu_seconds, log, rss_kb, start_stack

RESULTS_DIR = Path(__file__).resolve().parent / "results"
FLUSH_INTERVAL = 0.3  # conversations/runs.py: the answer is written at most this often while it streams


# --- the clients -----------------------------------------------------------------------------------


@dataclass
class StreamResult:
    sent: float = 0.0  # perf_counter when the request went out
    echo: float | None = None  # AgentChat: the user's message stored and echoed
    run_started: float | None = None
    first_token: float | None = None
    last_token: float | None = None
    finished: float | None = None
    tokens_text: list[str] = field(default_factory=list)
    frames: int = 0
    seqs: list[int] = field(default_factory=list)
    status: str = ""
    error: str = ""
    integrity: Integrity | None = None

    @property
    def ttft(self) -> float | None:
        return None if self.first_token is None else self.first_token - self.sent

    @property
    def streaming(self) -> float:
        if self.first_token is None or self.finished is None:
            return 0.0
        return self.finished - self.first_token


class Api:
    """The REST API of one server, as the bench user."""

    def __init__(self, server: Server, password: str):
        self.server = server
        self.password = password
        self.client = httpx.AsyncClient(base_url=server.http_url, timeout=60)
        self.token = ""

    async def sign_in(self) -> str:
        response = await self.client.post("/api/auth/token/", json={"username": BENCH_USER, "password": self.password})
        response.raise_for_status()
        self.token = response.json()["access"]
        return self.token

    async def conversations(self, count: int, label: str, parallel: int = 8) -> list[str]:
        gate = asyncio.Semaphore(parallel)
        headers = {"Authorization": f"Bearer {self.token}"}

        async def one(index: int) -> str:
            async with gate:
                response = await self.client.post(
                    "/api/assistant/conversations/", json={"title": f"bench {label} {index}"}, headers=headers
                )
                response.raise_for_status()
                return response.json()["id"]

        return await asyncio.gather(*(one(index) for index in range(count)))

    async def close(self) -> None:
        await self.client.aclose()


async def open_socket(server: Server, conversation_id: str, token: str, timeout: float = 60):
    """A chat socket, authenticated by its first frame, after its `ready`."""
    ws = await connect(
        server.ws_url(f"/ws/chat/{conversation_id}/"), open_timeout=timeout, max_size=2**22, ping_interval=None
    )
    try:
        await ws.send(json.dumps({"type": "auth", "token": token}))
        async with asyncio.timeout(timeout):
            while True:
                frame = json.loads(await ws.recv())
                if frame["type"] == "ready":
                    return ws
                if frame["type"] == "error":
                    raise RuntimeError(f"socket refused: {frame}")
    except BaseException:
        await ws.close()
        raise


async def open_sockets(
    servers: list[Server], conversations: list[str], token: str, parallel: int = 50, tolerate: bool = False
) -> list:
    """Sockets to the conversations, spread over the servers, `parallel` handshakes at a time.

    With `tolerate`, a socket that did not open is its exception in the list; otherwise the others are
    closed and the first failure raised.
    """
    gate = asyncio.Semaphore(parallel)

    async def one(index: int):
        async with gate:
            return await open_socket(servers[index % len(servers)], conversations[index], token)

    results = await asyncio.gather(*(one(index) for index in range(len(conversations))), return_exceptions=True)
    failed = [result for result in results if isinstance(result, BaseException)]
    if failed and not tolerate:
        await close_sockets([result for result in results if not isinstance(result, BaseException)])
        raise RuntimeError(f"{len(failed)} of {len(results)} sockets did not open: {failed[0]!r}")
    return results


async def close_sockets(sockets: list, parallel: int = 50) -> None:
    """Close, `parallel` at a time: the bench measures streams, not a storm of disconnections."""
    gate = asyncio.Semaphore(parallel)

    async def one(ws) -> None:
        async with gate:
            with contextlib.suppress(ConnectionClosed, OSError, TimeoutError):
                await asyncio.wait_for(ws.close(), 5)

    await asyncio.gather(*(one(ws) for ws in sockets if not isinstance(ws, BaseException)))


async def not_opened(error: BaseException, tag: str, count: int) -> StreamResult:
    result = StreamResult(error=f"the socket did not open: {error!r}"[:300])
    result.integrity = check_stream("", tag, count)
    return result


async def agentchat_stream(ws, tag: str, count: int, start: asyncio.Event, timeout: float) -> StreamResult:
    result = StreamResult()
    run_id = None
    await start.wait()
    try:
        async with asyncio.timeout(timeout):
            result.sent = time.perf_counter()
            await ws.send(json.dumps({"type": "message", "content": prompt(tag, count), "client_id": tag}))
            while True:
                raw = await ws.recv()
                now = time.perf_counter()
                frame = json.loads(raw)
                result.frames += 1
                kind = frame.get("type")
                if "seq" in frame:
                    run_id = run_id or frame.get("run_id")
                    if frame.get("run_id") == run_id:
                        result.seqs.append(frame["seq"])
                    else:
                        result.error = f"a frame of another run arrived: {frame.get('run_id')}"
                if kind == "message" and result.echo is None:
                    result.echo = now
                elif kind == "run_started":
                    result.run_started = now
                if kind == "token":
                    if result.first_token is None:
                        result.first_token = now
                    result.last_token = now
                    result.tokens_text.append(frame["delta"])
                elif kind == "error":
                    result.error = f"{frame.get('code')}: {frame.get('message')}"
                elif kind == "run_finished":
                    result.finished = now
                    result.status = frame.get("status", "")
                    break
    except TimeoutError:
        result.error = result.error or f"no run_finished within {timeout:g} s"
    except ConnectionClosed as exc:
        result.error = f"socket closed: {exc}"
    result.integrity = check_stream("".join(result.tokens_text), tag, count, result.seqs)
    return result


async def direct_stream(client: openai.AsyncOpenAI, tag: str, count: int, start: asyncio.Event, timeout: float):
    result = StreamResult()
    await start.wait()
    try:
        async with asyncio.timeout(timeout):
            result.sent = time.perf_counter()
            stream = await client.chat.completions.create(
                model="bench-model", messages=[{"role": "user", "content": prompt(tag, count)}], stream=True
            )
            async for chunk in stream:
                now = time.perf_counter()
                result.frames += 1
                if chunk.choices and chunk.choices[0].delta.content:
                    if result.first_token is None:
                        result.first_token = now
                    result.last_token = now
                    result.tokens_text.append(chunk.choices[0].delta.content)
                if chunk.choices and chunk.choices[0].finish_reason:
                    result.status = "completed"
            result.finished = time.perf_counter()
    except TimeoutError:
        result.error = f"not finished within {timeout:g} s"
    except openai.OpenAIError as exc:
        result.error = f"{type(exc).__name__}: {exc}"
    result.integrity = check_stream("".join(result.tokens_text), tag, count)
    return result


def _window(values_from: list[float | None], values_to: list[float | None]) -> float:
    starts = [value for value in values_from if value is not None]
    ends = [value for value in values_to if value is not None]
    return max(ends) - min(starts) if starts and ends else 0.0


def summarize(rounds: list[list[StreamResult]], processes: int = 1) -> dict[str, Any]:
    """The figures of a level: `rounds` of concurrent streams, one round after the other."""
    results = [result for one_round in rounds for result in one_round]
    ttfts = [r.ttft * 1000 for r in results if r.ttft is not None]
    echoes = [(r.echo - r.sent) * 1000 for r in results if r.echo is not None]
    starts = [(r.run_started - r.sent) * 1000 for r in results if r.run_started is not None]
    tokens = sum(r.integrity.received for r in results if r.integrity)
    # Rates are over the time the streams of a round were live, added up over the rounds.
    token_window = sum(_window([r.first_token for r in rnd], [r.last_token for r in rnd]) for rnd in rounds)
    wall = sum(_window([r.sent or None for r in rnd], [r.finished for r in rnd]) for rnd in rounds)
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
        "ttft_p50_ms": percentile(ttfts, 50),
        "ttft_p99_ms": percentile(ttfts, 99),
        "ttft_max_ms": max(ttfts) if ttfts else None,
        # Where AgentChat's time to first token goes: the echo of the stored message, then run_started.
        "echo_p50_ms": percentile(echoes, 50),
        "run_started_p50_ms": percentile(starts, 50),
        "tokens": tokens,
        "frames": sum(r.frames for r in results),
        "wall_s": wall,
        "token_window_s": token_window,
        "tokens_per_s": tokens / token_window if token_window else None,
        "tokens_per_s_per_process": tokens / token_window / processes if token_window else None,
        "frames_per_s": sum(r.frames for r in results) / wall if wall else None,
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


# --- the phases ------------------------------------------------------------------------------------


def total_writes(stack: Stack) -> dict[str, int]:
    merged: dict[str, int] = {}
    for server in stack.servers:
        for key, value in server.db_writes().items():
            merged[key] = merged.get(key, 0) + value
    return merged


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


async def run_direct(
    client: openai.AsyncOpenAI, streams: int, tokens: int, label: str, timeout: float, rounds: int = 1
) -> dict:
    results = []
    deadline = time.monotonic() + timeout
    for round_index in range(rounds):
        start = asyncio.Event()
        tasks = [
            asyncio.create_task(
                direct_stream(client, f"d{label}r{round_index}x{index}", tokens, start, deadline - time.monotonic())
            )
            for index in range(streams)
        ]
        await asyncio.sleep(0.05)
        start.set()
        results.append(await asyncio.gather(*tasks))
    return summarize(results)


async def run_agentchat(
    stack: Stack,
    conversations: list[str],
    token: str,
    tokens: int,
    label: str,
    timeout: float,
    sampler,
    profile=None,
    rounds: int = 1,
) -> dict:
    """`rounds` rounds of len(conversations) / rounds concurrent streams, each socket its own conversation."""
    servers = stack.servers
    streams = len(conversations) // rounds
    sockets = await open_sockets(servers, conversations, token, tolerate=True)
    try:
        cpu_before = {server.name: cpu_seconds(server.pid) for server in servers}
        writes_before = await asyncio.to_thread(total_writes, stack)
        sampler.reset()
        if profile is not None:
            await asyncio.to_thread(profile.start)
        deadline = time.monotonic() + timeout
        started = time.perf_counter()
        results = []
        for round_index in range(rounds):
            start = asyncio.Event()
            tasks = [
                asyncio.create_task(
                    not_opened(ws, f"a{label}r{round_index}x{index}", tokens)
                    if isinstance(ws, BaseException)
                    else agentchat_stream(
                        ws, f"a{label}r{round_index}x{index}", tokens, start, deadline - time.monotonic()
                    )
                )
                for index, ws in enumerate(sockets[round_index * streams : (round_index + 1) * streams])
            ]
            await asyncio.sleep(0.05)
            start.set()
            results.append(await asyncio.gather(*tasks))
        elapsed = time.perf_counter() - started
        if profile is not None:
            await asyncio.to_thread(profile.stop)
        writes = difference(await settled_writes(stack), writes_before)
        peaks = sampler.peak()
        cpu = {server.name: cpu_seconds(server.pid) - cpu_before[server.name] for server in servers}
    finally:
        await close_sockets(sockets)
    summary = summarize(results, processes=len(servers))
    runs = summary["runs"]
    every = [result for one_round in results for result in one_round]
    allowed = sum(int(result.streaming / FLUSH_INTERVAL) + 5 for result in every) / runs if runs else 0
    summary.update(
        {
            "db_writes": sum(writes.values()),
            "db_writes_per_run": sum(writes.values()) / runs if runs else None,
            "db_writes_allowed_per_run": allowed,
            "db_writes_by_statement": writes,
            "peak_rss_mb": {name: kb / 1024 for name, kb in peaks.items()},
            "server_cpu_s": cpu,
            "server_cpu_share": sum(cpu.values()) / elapsed / len(servers) if elapsed else None,
        }
    )
    return summary


# --- main ------------------------------------------------------------------------------------------


def rounds_for(args: argparse.Namespace, streams: int) -> int:
    """Small levels are run several times over, one round after the other, for enough TTFT samples."""
    return max(1, -(-args.samples // streams))


def tokens_for(args: argparse.Namespace, streams: int) -> int:
    return max(1, min(args.tokens, args.level_tokens // streams))


async def measure(args: argparse.Namespace, stack: Stack, report: dict[str, Any]) -> None:
    apis = [Api(server, stack.password) for server in stack.servers]
    direct = openai.AsyncOpenAI(
        api_key="sk-bench-not-a-secret", base_url=stack.provider_url, max_retries=0, timeout=120
    )
    try:
        token = await apis[0].sign_in()
        needed = sum(streams * rounds_for(args, streams) for streams in args.levels) + len(stack.servers)
        log(f"creating {needed} conversations over the REST API")
        conversations = await apis[0].conversations(needed, "conversation")
        warm, pool = conversations[: len(stack.servers)], conversations[len(stack.servers) :]

        if args.idle_sockets:
            log(f"opening {args.idle_sockets} idle authenticated sockets on {stack.servers[0].name}")
            report["idle_sockets"] = await idle_sockets(stack, pool or warm, token, args.idle_sockets)

        log("warming up (one run per process, one direct stream)")
        await run_direct(direct, 1, DEFAULT_TOKENS, "warm", args.timeout)
        sampler_warm = MemorySampler(stack.servers)
        for index, server in enumerate(stack.servers):
            solo = Stack(stack.work_dir, stack.provider, stack.provider_url, [server], stack.mode, stack.password)
            await run_agentchat(solo, [warm[index]], token, DEFAULT_TOKENS, f"warm{index}", args.timeout, sampler_warm)

        sampler = MemorySampler(stack.servers)
        sampler.start()
        offset = 0
        for streams in args.levels:
            left = args.budget - (time.monotonic() - args.began)
            if left < 30:  # a level cut short measures nothing worth reporting
                log(f"the time budget ({args.budget:g} s) is spent: {streams} streams skipped")
                report.setdefault("skipped_levels", []).append(streams)
                continue
            timeout = min(args.timeout, left)
            tokens, rounds = tokens_for(args, streams), rounds_for(args, streams)
            mine, offset = pool[offset : offset + streams * rounds], offset + streams * rounds
            times = f", {rounds} rounds one after the other" if rounds > 1 else ""
            log(f"{streams} streams × {tokens} tokens{times}: direct client")
            direct_summary = await run_direct(direct, streams, tokens, str(streams), timeout, rounds)
            log(f"{streams} streams × {tokens} tokens{times}: AgentChat")
            profile = None
            if args.profile and streams == args.profile_level:
                args.out.mkdir(parents=True, exist_ok=True)
                output = args.out / f"profile-{streams}.txt"
                profile = Profile(stack.servers[0].pid, output, stack.work_dir)
            chat = await run_agentchat(
                stack, mine, token, tokens, str(streams), timeout, sampler, profile=profile, rounds=rounds
            )
            level = {
                "streams": streams,
                "tokens_per_stream": tokens,
                "rounds": rounds,
                "direct": direct_summary,
                "agentchat": chat,
                "added_ttft_p50_ms": _minus(chat["ttft_p50_ms"], direct_summary["ttft_p50_ms"]),
                "added_ttft_p99_ms": _minus(chat["ttft_p99_ms"], direct_summary["ttft_p99_ms"]),
            }
            report["levels"].append(level)
            if profile is not None and profile.output.exists():
                report["profile"] = {"streams": streams, "raw": shown(profile.output)}
                report["profile"].update(hot_spots(profile.output, seconds=profile.seconds, rate=profile.RATE))
        sampler.stopping.set()
        report["peak_rss_mb"] = {server.name: rss_kb(server.pid, "VmHWM") / 1024 for server in stack.servers}
    finally:
        await direct.close()
        for api in apis:
            await api.close()


def _minus(a, b):
    return None if a is None or b is None else a - b


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    env = os.environ.get
    parser = argparse.ArgumentParser(prog="python -m bench", description="AgentChat benchmark (docs/benchmarks.md).")
    parser.add_argument(
        "--levels",
        default=env("BENCH_LEVELS", "1,50,500"),
        help="concurrent streams, comma-separated (env BENCH_LEVELS; default %(default)s)",
    )
    parser.add_argument(
        "--tokens", type=int, default=int(env("BENCH_TOKENS", "200")), help="tokens per stream (default %(default)s)"
    )
    parser.add_argument(
        "--level-tokens",
        type=int,
        default=int(env("BENCH_LEVEL_TOKENS", "20000")),
        help="at most this many tokens per level: big levels get fewer tokens per stream (default %(default)s)",
    )
    parser.add_argument(
        "--samples",
        type=int,
        default=int(env("BENCH_SAMPLES", "10")),
        help="at least this many streams per level: a level of fewer runs in rounds (default %(default)s)",
    )
    add_pace_arguments(parser)
    parser.add_argument(
        "--idle-sockets",
        type=int,
        default=int(env("BENCH_IDLE_SOCKETS", "1000")),
        help="idle authenticated sockets for the memory figure, 0 to skip (default %(default)s)",
    )
    parser.add_argument("--processes", type=int, default=0, help="daphne processes with PostgreSQL + Redis (2)")
    parser.add_argument("--sqlite", action="store_true", help="SQLite and one process even when DATABASE_URL is set")
    parser.add_argument("--timeout", type=float, default=120, help="seconds one level's streams may take")
    parser.add_argument(
        "--budget",
        type=float,
        default=float(env("BENCH_BUDGET", "180")),
        help="seconds for the whole bench: levels that would start later are skipped (default %(default)s)",
    )
    parser.add_argument("--profile", action="store_true", help="py-spy the first daphne during one level")
    parser.add_argument("--profile-level", type=int, default=50, help="the level to profile (default %(default)s)")
    parser.add_argument("--keep", action="store_true", help="keep the work directory (database, logs)")
    parser.add_argument(
        "--strict", action="store_true", help="exit 1 when a stream lost, repeated or reordered a token or failed"
    )
    parser.add_argument("--out", type=Path, default=RESULTS_DIR, help="where results go (default bench/results)")
    args = parser.parse_args(argv)
    args.levels = [int(level) for level in str(args.levels).split(",") if level.strip()]
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    args.began = time.monotonic()
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(143))
    began = time.monotonic()
    started_at = dt.datetime.now().astimezone()
    report: dict[str, Any] = {
        "started_at": started_at.isoformat(timespec="seconds"),
        "machine": machine(),
        "config": {
            "levels": args.levels,
            "samples": args.samples,
            "tokens": args.tokens,
            "level_tokens": args.level_tokens,
            "ttft_ms": args.ttft_ms,
            "rate_tokens_per_s": args.rate,
            "tick_ms": args.tick_ms,
            "idle_sockets": args.idle_sockets,
        },
        "levels": [],
    }
    log("starting the fake provider, preparing the database, starting daphne")
    stack = start_stack(args)
    report["mode"] = stack.mode
    report["processes"] = len(stack.servers)
    failed = True
    try:
        try:
            asyncio.run(measure(args, stack, report))
        except Exception as exc:
            # What was measured so far is still reported, with the reason it stopped.
            log(f"the bench stopped early: {exc!r}")
            report["failure"] = repr(exc)[:500]
        else:
            failed = False
    finally:
        stack.stop()
        if failed:
            log(f"failed; logs kept in {stack.work_dir}")
            for child in stack.children:
                log(f"--- {child.name}\n{child.tail()}")
        elif not args.keep:
            shutil.rmtree(stack.work_dir, ignore_errors=True)
    report["duration_s"] = time.monotonic() - began
    report["machine"]["load_average_at_end"] = os.getloadavg()
    report["targets"] = targets(report)
    args.out.mkdir(parents=True, exist_ok=True)
    stamp = started_at.strftime("%Y%m%d-%H%M%S")
    json_path, png_path = args.out / f"bench-{stamp}.json", args.out / f"bench-{stamp}.png"
    json_path.write_text(json.dumps(report, indent=2, default=_json_default) + "\n")
    shutil.copyfile(json_path, args.out / "latest.json")
    try:
        chart(report, png_path)
        shutil.copyfile(png_path, args.out / "latest.png")
    except ImportError:
        log("matplotlib is not installed: no chart")
        png_path = None
    print(render(report, json_path, png_path))
    intact = all(
        level["agentchat"]["streams_with_integrity_problems"] == 0
        and level["agentchat"]["completed"] == level["agentchat"]["streams"]
        for level in report["levels"]
    )
    return 0 if not failed and (intact or not args.strict) else 1


def _json_default(value):
    if isinstance(value, Integrity):
        return asdict(value)
    raise TypeError(type(value).__name__)


if __name__ == "__main__":
    sys.exit(main())
