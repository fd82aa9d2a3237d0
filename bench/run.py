"""`make bench`: AgentChat streaming side by side with a direct `openai` client, measured by the clients' clocks.

One process tree: this driver starts the fake provider (bench/fake_provider.py) and the server
(bench/server.py: daphne on a throwaway SQLite file, or on a throwaway PostgreSQL database with Redis
and two daphne processes when DATABASE_URL and REDIS_URL are set), then, for each concurrency level,
N direct `openai.AsyncOpenAI` streams and N WebSocket clients (each: a conversation of its own made
over the REST API with a JWT, first-frame auth, one message, read until `run_finished`); then, once, the
front door (bench/front_door.py: three 10 MB uploads, two 60 MB bodies refused, pings meanwhile). It
prints a table and writes bench/results/bench-<time>.json and .png (and latest.json / latest.png).

    python -m bench --help
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import json
import os
import shutil
import signal
import sys
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

import openai

from .checks import Integrity
from .clients import Api, agentchat_stream, close_sockets, direct_stream, not_opened, open_sockets
from .fake_provider import DEFAULT_TOKENS, add_pace_arguments
from .front_door import measure_front_door
from .measures import difference, idle_sockets, settled_writes, summarize, total_writes
from .report import chart, hot_spots, machine, render, shown, targets
from .stack import MemorySampler, Profile, Stack, cpu_seconds, log, rss_kb, start_stack

RESULTS_DIR = Path(__file__).resolve().parent / "results"
# The target for database writes: at most one per this many seconds of streaming, plus five, per run.
WRITES_TARGET_INTERVAL = 0.3


# --- the clients -----------------------------------------------------------------------------------


# --- the phases ------------------------------------------------------------------------------------


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
    allowed = sum(int(result.streaming / WRITES_TARGET_INTERVAL) + 5 for result in every) / runs if runs else 0
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

        # Once, after the levels (so that their memory figures hold no upload), outside the budget: ~1 minute.
        if args.uploads:
            report["front_door"] = await measure_front_door(stack, apis[0], stack.work_dir / "front-door")
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
        help="seconds for the bench up to its last streaming level: a level that would start later is skipped; "
        "the front door (about a minute) comes after, outside it (default %(default)s)",
    )
    parser.add_argument(
        "--no-uploads",
        dest="uploads",
        action="store_false",
        help="skip the front door: three 10 MB uploads and two 60 MB bodies refused, about a minute after the levels",
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
            "uploads": args.uploads,
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
