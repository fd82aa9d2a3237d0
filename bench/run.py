"""`make bench`: AgentChat streaming side by side with a direct client of the provider, measured by the clients' clocks.

One process tree per setup: this driver starts the fake provider (bench/fake_provider.py) and the server
(bench/server.py): first daphne on a throwaway SQLite file, then, when PostgreSQL and Redis are there
(DATABASE_URL and REDIS_URL, or their usual loopback ports), two daphne processes on a throwaway PostgreSQL
database with Redis. At each concurrency level, round after round, N direct streams (aiohttp) and
N WebSocket clients (each: a conversation of its own made over the REST API with a JWT, first-frame auth,
one message, read until `run_finished`) ask for the same N streams, the direct client first in every other
round. Every setup's processes are left running while the next is measured; then their capacity searches take
turns: the most concurrent streams each carries within the bound on added time to first token; then, once, the
front door (bench/front_door.py: three 10 MB uploads, two 60 MB bodies refused, pings meanwhile). It prints a
table and writes bench/results/bench-<time>.json, .md and .png (and latest.json / latest.md / latest.png).

    python -m bench --help
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import datetime as dt
import json
import os
import shutil
import signal
import sys
import time
from collections.abc import AsyncIterator, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, TypeVar

import aiohttp

from .checks import MIN_P99_SAMPLES, Integrity, bracket, intact, next_probe, within_capacity
from .clients import (
    Api,
    StreamPlan,
    StreamResult,
    agentchat_stream,
    close_sockets,
    direct_client,
    direct_stream,
    not_opened,
    open_sockets,
)
from .fake_provider import DEFAULT_TOKENS, add_pace_arguments, pace_from
from .front_door import measure_front_door
from .measures import (
    collector_passes,
    collector_summary,
    difference,
    idle_sockets,
    settled_writes,
    summarize,
    total_writes,
)
from .report import capacities, chart, commit, hot_spots, machine, markdown, render, shown, targets
from .search import measure_search
from .stack import (
    MemorySampler,
    Profile,
    Server,
    Setup,
    Stack,
    cpu_seconds,
    log,
    rss_kb,
    scaled_setup,
    start_stack,
)

T = TypeVar("T")
RESULTS_DIR = Path(__file__).resolve().parent / "results"
# The capacity search doubles from here when no level has told it more.
CAPACITY_START = 50
# A level or a probe starts only with this much of the budget left; a second setup, with twice as much.
LEAST_LEFT_S = 30


@dataclass(frozen=True)
class Level:
    """`streams` concurrent streams, `rounds` times over, of `tokens` tokens at `rate` tokens a second."""

    streams: int
    rounds: int
    tokens: int
    rate: float
    label: str
    stress: bool = False


@dataclass
class Bench:
    """What the levels and probes of one setup share."""

    args: argparse.Namespace
    setup: Setup
    stack: Stack
    api: Api
    direct: aiohttp.ClientSession
    token: str
    sampler: MemorySampler

    def left(self) -> float:
        return self.args.deadline - time.monotonic()


# --- one level -------------------------------------------------------------------------------------


def rounds_for(args: argparse.Namespace, streams: int) -> int:
    """Enough rounds for MIN_P99_SAMPLES first tokens, at most `--max-rounds`."""
    return min(args.max_rounds, -(-MIN_P99_SAMPLES // streams))


def tokens_for(args: argparse.Namespace, rounds: int) -> int:
    """A level of many rounds gets shorter streams: a lone stream's first token does not depend on its length."""
    return max(1, min(args.tokens, args.level_tokens // rounds))


def level_for(args: argparse.Namespace, streams: int, rounds: int, label: str) -> Level:
    return Level(streams, rounds, tokens_for(args, rounds), args.rate, label)


def stream_plans(args: argparse.Namespace, level: Level) -> list[list[StreamPlan]]:
    """Each round's streams: the pace of each fixed by its name, so that both legs get the same."""
    pace = dataclasses.replace(pace_from(args), rate=level.rate)
    names = [[f"{level.label}r{r}x{index}" for index in range(level.streams)] for r in range(level.rounds)]
    return [[StreamPlan(name, level.tokens, pace.for_stream(name)) for name in row] for row in names]


def in_turn(items: Sequence[T], index: int) -> list[T]:
    """`items` in their order on even turns and the other way round on odd ones (ABBA), so that a drift in the
    machine's speed falls on each alike."""
    return list(items if index % 2 == 0 else reversed(items))


def round_order(index: int) -> list[str]:
    """The legs of round `index`: direct first in even rounds, AgentChat first in odd ones."""
    return in_turn(("direct", "agentchat"), index)


async def play_round(
    leg: str, direct: aiohttp.ClientSession, sockets: list, plan: list[StreamPlan], timeout: float
) -> list[StreamResult]:
    """One round of one leg: every stream's task made first, then all started by one signal."""
    start = asyncio.Event()
    if leg == "direct":
        streams = [direct_stream(direct, one, start, timeout) for one in plan]
    else:
        streams = [
            not_opened(ws, one) if isinstance(ws, BaseException) else agentchat_stream(ws, one, start, timeout)
            for ws, one in zip(sockets, plan, strict=True)
        ]
    tasks = [asyncio.create_task(stream) for stream in streams]
    await asyncio.sleep(0.05)
    start.set()
    return await asyncio.gather(*tasks)


async def run_level(
    bench: Bench, level: Level, profile: Profile | None = None, servers: list[Server] | None = None
) -> dict[str, Any]:
    """The level's rounds, both legs in each, its sockets spread over `servers` (all of the setup's by default); the
    server's writes and memory over the whole level (the direct legs do not touch it), and its processor time over
    the AgentChat legs alone (between rounds it idles)."""
    stack = bench.stack
    conversations = await bench.api.conversations(level.streams * level.rounds, level.label)
    sockets = await open_sockets(servers or stack.servers, conversations, bench.token, tolerate=True)
    legs: dict[str, list[list[StreamResult]]] = {"direct": [], "agentchat": []}
    agentchat_seconds = 0.0
    cpu = dict.fromkeys((server.name for server in stack.servers), 0.0)
    try:
        writes_before = await asyncio.to_thread(total_writes, stack)
        passes_before = await asyncio.to_thread(collector_passes, stack)
        bench.sampler.reset()
        if profile is not None:
            await asyncio.to_thread(profile.start)
        deadline = time.monotonic() + min(bench.args.timeout, bench.left())
        for index, plan in enumerate(stream_plans(bench.args, level)):
            mine = sockets[index * level.streams : (index + 1) * level.streams]
            for leg in round_order(index):
                started = time.perf_counter()
                cpu_before = {server.name: cpu_seconds(server.pid) for server in stack.servers}
                legs[leg].append(await play_round(leg, bench.direct, mine, plan, deadline - time.monotonic()))
                if leg == "agentchat":
                    agentchat_seconds += time.perf_counter() - started
                    for server in stack.servers:
                        cpu[server.name] += cpu_seconds(server.pid) - cpu_before[server.name]
        if profile is not None:
            await asyncio.to_thread(profile.stop)
        writes = difference(await settled_writes(stack), writes_before)
        passes = await asyncio.to_thread(collector_passes, stack)
        peaks = bench.sampler.peak()
    finally:
        await close_sockets(sockets)
    direct, chat = summarize(legs["direct"]), summarize(legs["agentchat"])
    runs = chat["runs"]
    chat.update(
        {
            "db_writes": sum(writes.values()),
            "db_writes_per_run": sum(writes.values()) / runs if runs else None,
            "db_writes_by_statement": writes,
            "collector": collector_summary(passes, passes_before),
            "peak_rss_mb": {name: kb / 1024 for name, kb in peaks.items()},
            "server_cpu_s": cpu,
            "server_cpu_ms_per_run": sum(cpu.values()) * 1000 / runs if runs else None,
            "server_cpu_share": sum(cpu.values()) / agentchat_seconds / len(stack.servers)
            if agentchat_seconds
            else None,
        }
    )
    return {
        "setup": bench.setup.name,
        "streams": level.streams,
        "rounds": level.rounds,
        "tokens_per_stream": level.tokens,
        "rate": level.rate,
        "stress": level.stress,
        "direct": direct,
        "agentchat": chat,
        "added_ttft_p50_ms": _minus(chat["ttft_p50_ms"], direct["ttft_p50_ms"]),
        "added_ttft_p99_ms": _minus(chat["ttft_p99_ms"], direct["ttft_p99_ms"]),
    }


def _minus(a, b):
    return None if a is None or b is None else a - b


# --- capacity --------------------------------------------------------------------------------------


def tried(level: dict[str, Any], source: str) -> dict[str, Any]:
    """A level or probe as the capacity search saw it."""
    chat = level["agentchat"]
    problems = ("lost", "duplicated", "reordered", "foreign", "seq_problems", "unfinished")
    return {
        "streams": level["streams"],
        "rounds": level["rounds"],
        "source": source,
        "samples": chat["ttft_samples"],
        "added_ttft_p50_ms": level["added_ttft_p50_ms"],
        "added_ttft_p99_ms": level["added_ttft_p99_ms"],
        "intact": intact(chat),
        "problems": {key: chat[key] for key in problems},
        "errors": chat["errors"],
        "ok": within_capacity(level),
    }


@dataclass
class CapacitySearch:
    """One search for the most concurrent streams a setup carries (checks.within_capacity), to about 10%, on
    `servers` (all of its processes when None): the setup's levels at the usual pace with enough samples count as
    tried already; then probes of MIN_P99_SAMPLES streams or more each, doubling from the most that passed until one
    fails, then halving the gap."""

    bench: Bench
    name: str
    servers: list[Server] | None = None
    levels: list[dict[str, Any]] = dataclasses.field(default_factory=list)
    cut_short: bool = False

    def __post_init__(self) -> None:
        self.seen = [
            tried(level, "level")
            for level in self.levels
            if not level["stress"] and level["streams"] * level["rounds"] >= MIN_P99_SAMPLES
        ]
        self.results = {entry["streams"]: entry["ok"] for entry in self.seen}

    def next_streams(self) -> int | None:
        return next_probe(*bracket(self.results), start=CAPACITY_START, most=self.bench.args.capacity_max)

    async def probe(self, streams: int) -> None:
        rounds = -(-MIN_P99_SAMPLES // streams)
        log(f"capacity of {self.name}: {streams} streams × {rounds} rounds")
        level = level_for(self.bench.args, streams, rounds, f"c{streams}")
        entry = tried(await run_level(self.bench, level, servers=self.servers), "probe")
        log(f"capacity of {self.name}: {streams} streams {'carried' if entry['ok'] else 'not carried'}")
        self.seen.append(entry)
        self.results[streams] = entry["ok"]

    def outcome(self) -> dict[str, Any]:
        passed, failed = bracket(self.results)
        return {"streams": passed, "failed_at": failed, "cut_short": self.cut_short, "tried": self.seen}


async def search_capacities(searches: list[CapacitySearch], budget: float) -> None:
    """The searches' probes in turn, one each a turn, the order reversed every other turn (as the legs of a level),
    so that the machine's speed, which moves within the hour, weighs on every setup alike: the capacities are
    compared with each other. A probe starts only within `budget` seconds and the bench's budget."""
    ends = time.monotonic() + budget
    going = list(searches)
    turn = 0
    while going:
        for search in in_turn(going, turn):
            streams = search.next_streams()
            if streams is None:
                going.remove(search)
            elif time.monotonic() >= ends or search.bench.left() < LEAST_LEFT_S:
                search.cut_short = True
                log(f"capacity of {search.name}: the time is spent, {streams} streams not tried")
                going.remove(search)
            else:
                await search.probe(streams)
        turn += 1


# --- the setups ------------------------------------------------------------------------------------


def levels_of(args: argparse.Namespace, first: bool) -> list[Level]:
    """The first setup's levels and the stress level; a second setup's `--scaled-levels`."""
    counts = args.levels if first else args.scaled_levels
    levels = [level_for(args, streams, rounds_for(args, streams), str(streams)) for streams in counts]
    if first and args.stress:
        streams, rate = args.stress
        rounds = rounds_for(args, streams)
        levels.append(Level(streams, rounds, tokens_for(args, rounds), rate, f"s{streams}", stress=True))
    return levels


@contextlib.asynccontextmanager
async def opened(args: argparse.Namespace, setup: Setup) -> AsyncIterator[Bench]:
    """The setup's process tree, started and signed in to; stopped at the end, its logs printed (and kept) when
    the bench stopped early."""
    log(f"{setup.mode}: starting the fake provider, preparing the database, starting daphne")
    stack = await asyncio.to_thread(start_stack, args, setup)
    failed = True
    api = Api(stack.servers[0], stack.password)
    direct = direct_client(stack.provider_url)
    sampler = MemorySampler(stack.servers)
    try:
        yield Bench(args, setup, stack, api, direct, await api.sign_in(), sampler)
        failed = False
    finally:
        sampler.stopping.set()
        await direct.close()
        await api.close()
        stack.stop()
        if failed:
            log(f"failed; logs kept in {stack.work_dir}")
            for child in stack.children:
                log(f"--- {child.name}\n{child.tail()}")
        elif not args.keep:
            shutil.rmtree(stack.work_dir, ignore_errors=True)


async def measure_levels(bench: Bench, report: dict[str, Any], first: bool) -> None:
    args, stack, setup = bench.args, bench.stack, bench.setup
    if first and args.idle_sockets:
        log(f"opening {args.idle_sockets} idle authenticated sockets on {stack.servers[0].name}")
        conversations = await bench.api.conversations(min(100, args.idle_sockets), "idle")
        report["idle_sockets"] = await idle_sockets(stack, conversations, bench.token, args.idle_sockets)

    log("warming up (one run per process, as many direct streams)")
    await run_level(bench, Level(len(stack.servers), 1, DEFAULT_TOKENS, args.rate, "warm"))
    bench.sampler.start()
    for level in levels_of(args, first):
        name = f"{level.streams} stream{'s' * (level.streams != 1)}"
        name += f" at {level.rate:g} tokens/s" if level.stress else ""
        if bench.left() < LEAST_LEFT_S:  # a level cut short measures nothing worth reporting
            log(f"the time budget ({args.budget:g} s) is spent: {name} skipped")
            report.setdefault("skipped_levels", []).append(f"{setup.name}: {name}")
            continue
        log(f"{name} × {level.tokens} tokens, {level.rounds} round(s), direct and AgentChat in turn")
        profile = None
        if first and args.profile and level.streams == args.profile_level and not level.stress:
            args.out.mkdir(parents=True, exist_ok=True)
            profile = Profile(stack.servers[0].pid, args.out / f"profile-{level.streams}.txt", stack.work_dir)
        report["levels"].append(await run_level(bench, level, profile))
        if profile is not None and profile.output.exists():
            report["profile"] = {"streams": level.streams, "raw": shown(profile.output)}
            report["profile"].update(hot_spots(profile.output, seconds=profile.seconds, rate=profile.RATE))


def capacity_searches(bench: Bench, report: dict[str, Any]) -> list[tuple[str, CapacitySearch]]:
    """The setup's search, and on several processes one more with every probe's sockets on the first and the
    others idle: what one more process brings, on the same database, Redis and machine. Each with the report's
    key it goes under."""
    setup, servers = bench.setup, bench.stack.servers
    mine = [level for level in report["levels"] if level["setup"] == setup.name]
    searches = [("capacity", CapacitySearch(bench, setup.name, levels=mine))]
    if len(servers) > 1:
        searches.append(("capacity_one_process", CapacitySearch(bench, f"{setup.name} {servers[0].name}", servers[:1])))
    return searches


async def measure(args: argparse.Namespace, chosen: list[Setup], report: dict[str, Any]) -> None:
    """Each setup's levels in turn, its processes left running; then the capacity searches of all of them in turn;
    then the front door on the first. What was measured before a failure is reported, with the reason it stopped."""
    where = ""
    try:
        async with contextlib.AsyncExitStack() as running:
            benches: list[Bench] = []
            for setup in chosen:
                if benches and args.deadline - time.monotonic() < 2 * LEAST_LEFT_S:
                    log(f"{setup.mode}: skipped (no time left)")
                    report.setdefault("skipped_setups", []).append(setup.mode)
                    continue
                where = setup.mode
                report["setups"].append({"name": setup.name, "mode": setup.mode, "processes": setup.processes})
                benches.append(await running.enter_async_context(opened(args, setup)))
                await measure_levels(benches[-1], report, first=len(benches) == 1)
            if args.capacity_budget > 0:
                where = "capacity"
                searches = [
                    (entry, key, search)
                    for bench, entry in zip(benches, report["setups"], strict=True)
                    for key, search in capacity_searches(bench, report)
                ]
                await search_capacities([search for _, _, search in searches], args.capacity_budget * len(searches))
                for entry, key, search in searches:
                    entry[key] = search.outcome()
            for bench, entry in zip(benches, report["setups"], strict=True):
                entry["peak_rss_mb"] = {
                    server.name: rss_kb(server.pid, "VmHWM") / 1024 for server in bench.stack.servers
                }
            # Once, after the streams (so that their memory figures hold no upload), outside the budget: ~1 minute.
            if benches and args.uploads:
                where, first = "front door", benches[0]
                began = time.monotonic()
                report["front_door"] = await measure_front_door(
                    first.stack, first.api, first.stack.work_dir / "front-door"
                )
                args.deadline += time.monotonic() - began
    except Exception as exc:
        log(f"the bench stopped early: {exc!r}")
        report["failure"] = f"{where}: {exc!r}"[:500]


def setups(args: argparse.Namespace) -> list[Setup]:
    chosen = []
    for name in args.setups:
        if name == "sqlite":
            chosen.append(Setup("sqlite"))
            continue
        scaled = scaled_setup(args.processes)
        if scaled is None:
            log(
                "PostgreSQL and Redis do not answer on 127.0.0.1:5432 and :6379, and DATABASE_URL and REDIS_URL are "
                "not set: the scaled setup is skipped"
            )
        else:
            chosen.append(scaled)
    return chosen


def exit_code(report: dict[str, Any], strict: bool) -> int:
    """1 when the bench stopped early; under `strict`, also when any run (of a level or a capacity probe) failed
    or lost, repeated or reordered a token; 0 otherwise."""
    if report.get("failure"):
        return 1
    if not strict:
        return 0
    probes = [entry for capacity in capacities(report) for entry in capacity["tried"] if entry["source"] == "probe"]
    whole = all(intact(level["agentchat"]) for level in report["levels"]) and all(entry["intact"] for entry in probes)
    return 0 if whole else 1


# --- main ------------------------------------------------------------------------------------------


def _counts(text: str) -> list[int]:
    return [int(item) for item in str(text).split(",") if item.strip()]


def _stress(text: str) -> tuple[int, float] | None:
    """`50@500` → 50 streams at 500 tokens/s; empty or 0 for none."""
    if str(text).strip() in {"", "0"}:
        return None
    streams, _, rate = str(text).partition("@")
    if not rate:
        raise argparse.ArgumentTypeError(f"not STREAMS@RATE: {text!r}")
    return int(streams), float(rate)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    env = os.environ.get
    parser = argparse.ArgumentParser(prog="python -m bench", description="AgentChat benchmark (docs/benchmarks.md).")
    parser.add_argument(
        "--setups",
        default=env("BENCH_SETUPS", "sqlite,scaled"),
        help="sqlite (one process), scaled (PostgreSQL + Redis, --processes processes; when they answer), "
        "comma-separated, in order (env BENCH_SETUPS; default %(default)s)",
    )
    parser.add_argument(
        "--levels",
        type=_counts,
        default=env("BENCH_LEVELS", "1,10,50,200"),
        help="concurrent streams, comma-separated, on the first setup (env BENCH_LEVELS; default %(default)s)",
    )
    parser.add_argument(
        "--scaled-levels",
        type=_counts,
        default=env("BENCH_SCALED_LEVELS", "1,50"),
        help="concurrent streams on the scaled setup after SQLite (default %(default)s)",
    )
    parser.add_argument(
        "--stress",
        type=_stress,
        default=env("BENCH_STRESS", "50@500"),
        help="STREAMS@RATE: one more level on the first setup at RATE tokens/s, its integrity checked "
        "and no latency target; 0 for none (default %(default)s)",
    )
    parser.add_argument(
        "--tokens", type=int, default=int(env("BENCH_TOKENS", "100")), help="tokens per stream (default %(default)s)"
    )
    parser.add_argument(
        "--level-tokens",
        type=int,
        default=int(env("BENCH_LEVEL_TOKENS", "600")),
        help="at most this many tokens per stream over a level's rounds: a level of many rounds gets shorter "
        "streams (default %(default)s)",
    )
    parser.add_argument(
        "--max-rounds",
        type=int,
        default=30,
        help=f"a level runs enough rounds for {MIN_P99_SAMPLES} samples, at most this many (default %(default)s)",
    )
    add_pace_arguments(parser)
    parser.add_argument(
        "--idle-sockets",
        type=int,
        default=int(env("BENCH_IDLE_SOCKETS", "1000")),
        help="idle authenticated sockets for the memory figure, 0 to skip (default %(default)s)",
    )
    parser.add_argument(
        "--processes", type=int, default=2, help="daphne processes of the scaled setup (default %(default)s)"
    )
    parser.add_argument(
        "--capacity-budget",
        type=float,
        default=float(env("BENCH_CAPACITY_BUDGET", "90")),
        help="seconds of probes for each capacity search: the searches, taking turns, start probes for at most this "
        "times their number; 0 to skip them (default %(default)s)",
    )
    parser.add_argument(
        "--capacity-max", type=int, default=800, help="the most streams the capacity search tries (default %(default)s)"
    )
    parser.add_argument("--timeout", type=float, default=120, help="seconds one level's streams may take")
    parser.add_argument(
        "--budget",
        type=float,
        default=float(env("BENCH_BUDGET", "450")),
        help="seconds for the streams of every setup, counted from the start: a level or probe that would start "
        f"with less than {LEAST_LEFT_S} s left is skipped, a second setup with less than {2 * LEAST_LEFT_S} s; "
        "the front door (about a minute) is outside it (default %(default)s)",
    )
    parser.add_argument(
        "--no-uploads",
        dest="uploads",
        action="store_false",
        help="skip the front door: three 10 MB uploads and two 60 MB bodies refused, about a minute",
    )
    parser.add_argument(
        "--no-search",
        dest="search",
        action="store_false",
        help="skip the search: 200,000 messages seeded on each database and searched through the API, about a minute",
    )
    parser.add_argument(
        "--only",
        choices=["search"],
        help="only this part: `search` runs no streams and no front door (a minute instead of eight)",
    )
    parser.add_argument(
        "--search-conversations",
        type=int,
        default=10_000,
        help="conversations the search seeds, 20 messages each, a tenth of them the searching user's "
        "(default %(default)s)",
    )
    parser.add_argument(
        "--search-repeat", type=int, default=20, help="timed requests for each kind of search (default %(default)s)"
    )
    parser.add_argument("--profile", action="store_true", help="py-spy the first daphne during one level")
    parser.add_argument("--profile-level", type=int, default=50, help="the level to profile (default %(default)s)")
    parser.add_argument("--keep", action="store_true", help="keep the work directories (databases, logs)")
    parser.add_argument(
        "--strict",
        action="store_true",
        help="exit 1 when a run (of a level or a capacity probe) failed or lost, repeated or reordered a token",
    )
    parser.add_argument("--out", type=Path, default=RESULTS_DIR, help="where results go (default bench/results)")
    args = parser.parse_args(argv)
    args.setups = [name.strip() for name in str(args.setups).split(",") if name.strip()]
    unknown = set(args.setups) - {"sqlite", "scaled"}
    if unknown:
        parser.error(f"unknown setups: {', '.join(sorted(unknown))}")
    if args.only == "search":
        args.search = True
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(143))
    began = time.monotonic()
    args.deadline = began + args.budget
    started_at = dt.datetime.now().astimezone()
    report: dict[str, Any] = {
        "started_at": started_at.isoformat(timespec="seconds"),
        "commit": commit(),
        "machine": machine(),
        "config": {
            "setups": args.setups,
            "levels": args.levels,
            "scaled_levels": args.scaled_levels,
            "stress": args.stress,
            "tokens": args.tokens,
            "level_tokens": args.level_tokens,
            "ttft_ms": args.ttft_ms,
            "rate_tokens_per_s": args.rate,
            "tick_ms": args.tick_ms,
            "idle_sockets": args.idle_sockets,
            "capacity_budget_s": args.capacity_budget,
            "budget_s": args.budget,
            "uploads": args.uploads,
            "search": args.search,
            "only": args.only,
        },
        "setups": [],
        "levels": [],
    }
    if args.only != "search":
        asyncio.run(measure(args, setups(args), report))
    if args.search:
        report["search"] = measure_search(args)
        for database in report["search"]["databases"]:
            if database.get("error"):
                report.setdefault("failure", f"search on {database['database']}: {database['error']}"[:500])
    report["duration_s"] = time.monotonic() - began
    report["machine"]["load_average_at_end"] = os.getloadavg()
    report["targets"] = targets(report) if args.only != "search" else []
    args.out.mkdir(parents=True, exist_ok=True)
    stamp = started_at.strftime("%Y%m%d-%H%M%S")
    # A run of one part does not replace the latest figures of the whole bench.
    name, latest = ("bench", "latest") if args.only is None else (f"bench-{args.only}", f"latest-{args.only}")
    json_path, md_path, png_path = (args.out / f"{name}-{stamp}.{ext}" for ext in ("json", "md", "png"))
    json_path.write_text(json.dumps(report, indent=2, default=_json_default) + "\n")
    md_path.write_text(markdown(report) + "\n")
    for path in (json_path, md_path):
        shutil.copyfile(path, args.out / f"{latest}{path.suffix}")
    if not report["levels"]:
        png_path = None  # no streams, no chart
    else:
        try:
            chart(report, png_path)
            shutil.copyfile(png_path, args.out / "latest.png")
        except ImportError:
            log("matplotlib is not installed: no chart")
            png_path = None
    print(render(report, [json_path, md_path, png_path]))
    return exit_code(report, args.strict)


def _json_default(value):
    if isinstance(value, Integrity):
        return asdict(value)
    raise TypeError(type(value).__name__)


if __name__ == "__main__":
    sys.exit(main())
