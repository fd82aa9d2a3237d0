"""What the bench prints and writes: the table, the targets, the markdown, the chart, the profile's hot spots."""

from __future__ import annotations

import contextlib
import datetime as dt
import os
import platform
import re
import subprocess
import time
from pathlib import Path
from typing import Any

from .checks import CAPACITY_ADDED_MS, intact

BASE_DIR = Path(__file__).resolve().parent.parent
# Added time to first token against the direct client, SQLite and one process: (streams, percentile, at most ms).
LATENCY_TARGETS = ((1, 50, 5.0), (50, 50, 100.0), (50, 99, 250.0), (200, 50, 500.0))
AIM_ONE_STREAM_MS = 1.0
# Two processes on PostgreSQL + Redis carry clearly more concurrent streams than one on SQLite, and than one of them
# alone: this many times.
CLEARLY_MORE = 1.25
# The longest another person's socket may wait for a pong while a 60 MB body is refused (the front-door tests').
PONG_WAIT_MS_REFUSING = 1000.0
# What the server wrote and held at commit b34e34f, before its start path and fan-out were reworked, measured by
# this bench at its default pacing (SQLite, one process; three runs). Writes: 9.2 per run plus one per 300 ms
# streamed (first token to run_finished) covered every level, 1 to 200 streams and the stress level; at
# 10 streams they came to 13.0 per run for 1.15 s streamed (9.16 + 3.83). Idle socket: 42.6 to 42.8 KB.
# A run may write no more, an idle socket hold no more (give or take 5%, the noise between runs).
BASELINE = {
    "commit": "b34e34f",
    "db_writes_per_run": 9.2,
    "db_writes_per_streamed_s": 1 / 0.3,
    "idle_socket_kb": 42.8,
    "idle_socket_noise": 0.05,
}
MiB = 1024 * 1024


FRAME = re.compile(r"^(?P<function>.*) \((?P<file>[^()]*?)(?::\d+)?\)$")
PRODUCT = ("agentchat/", "conversations/", "tools/")
# Frames (nearly) every sample of a thread passes through: the inclusive list is more telling without them.
PLUMBING = (
    "<frozen runpy>",
    "bench/",
    "daphne/cli.py",
    "daphne/server.py",
    "twisted/internet/",
    "asyncio/base_events.py",
    "asyncio/events.py",
    "threading.py",
    "concurrent/futures/thread.py",
)


def _function(frame: str) -> str:
    """`name (file:line)` → `name (file)`: a function's samples counted together, whatever the line."""
    found = FRAME.match(frame)
    return f"{found['function']} ({found['file']})" if found else frame


THREAD = re.compile(r"^thread \((?P<id>[^)]*)\)(?::\s*(?P<name>.*))?$")


def _thread_name(frame: str) -> str:
    """py-spy's `thread (id): name` frame → the name, the event loop's thread said as such."""
    found = THREAD.match(frame)
    name = (found["name"] or found["id"]) if found else "?"
    return "MainThread (the event loop)" if name == "MainThread" else name


def hot_spots(raw: Path, top: int = 15, seconds: float = 0.0, rate: int = 0) -> dict[str, Any]:
    """Where the samples of py-spy's collapsed stacks fall: per function, own time and time inside (inclusive).

    `inclusive` leaves out the frames nearly every sample passes through (the event loop, daphne's
    start-up); `product` is the inclusive list of this project's own code. `threads` is each kind of
    thread's share of the samples and, given the sampling `rate` and the `seconds` sampled, how busy it
    was (an idle thread is not sampled: 100% is a thread that never waited).
    """
    own: dict[str, int] = {}
    inclusive: dict[str, int] = {}
    threads: dict[str, int] = {}
    total = 0
    for line in raw.read_text(errors="replace").splitlines():
        stack, _, count_text = line.rpartition(" ")
        if not stack or not count_text.isdigit():
            continue
        count = int(count_text)
        parts = stack.split(";")
        thread = _thread_name(next((part for part in parts if part.startswith("thread (")), ""))
        frames = [_function(frame) for frame in parts if frame and not frame.startswith("thread (")]
        if not frames:
            continue
        total += count
        threads[thread] = threads.get(thread, 0) + count
        own[frames[-1]] = own.get(frames[-1], 0) + count
        for frame in set(frames):
            inclusive[frame] = inclusive.get(frame, 0) + count

    def ranked(counts: dict[str, int], keep=lambda name, share: True) -> list[dict[str, Any]]:
        shares = [(name, count / total) for name, count in sorted(counts.items(), key=lambda item: -item[1])]
        return [{"function": name, "share": share} for name, share in shares if keep(name, share)][:top]

    if not total:
        return {"samples": 0, "self": [], "inclusive": [], "product": [], "threads": []}
    busy = [
        {
            "thread": name,
            "share": count / total,
            "busy": count / (seconds * rate) if seconds and rate else None,
        }
        for name, count in sorted(threads.items(), key=lambda item: -item[1])
    ]
    return {
        "samples": total,
        "seconds": seconds,
        "threads": busy,
        "self": ranked(own),
        "inclusive": ranked(inclusive, lambda name, share: _file(name).startswith(PLUMBING) is False),
        "product": ranked(inclusive, lambda name, share: _in_product(name)),
    }


def _file(function: str) -> str:
    found = FRAME.match(function)
    return found["file"] if found else ""


def _in_product(function: str) -> bool:
    return _file(function).startswith(PRODUCT)


def reference_loop() -> int:
    """A fixed piece of plain Python work (loops, calls, a dict, strings), like the server's own, whose time tells
    how fast this machine runs the interpreter: runs on different machines, or on one machine on a busy day, differ
    by about as much."""
    total, table = 0, {}
    for index in range(200_000):
        table[index % 1000] = total
        total += len(str(index))
    return total


def reference_loop_ms(repeat: int = 5) -> float:
    """The reference loop's best time of `repeat`, in milliseconds."""
    best = float("inf")
    for _ in range(repeat):
        started = time.perf_counter()
        reference_loop()
        best = min(best, time.perf_counter() - started)
    return best * 1000


def machine() -> dict[str, Any]:
    model = ""
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    return {
        "cpu": model,
        "cores": os.cpu_count(),
        "memory_gb": round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30, 1),
        "python": platform.python_version(),
        "reference_loop_ms": reference_loop_ms(),
        "system": platform.platform(),
        "load_average_at_start": os.getloadavg(),
    }


def commit() -> dict[str, Any]:
    """The commit measured, and whether the tracked files differed from it (read only: no index refresh)."""

    def git(*arguments: str) -> subprocess.CompletedProcess:
        command = ["git", "--no-optional-locks", *arguments]
        return subprocess.run(command, cwd=BASE_DIR, capture_output=True, text=True, timeout=30)  # noqa: S603 - git, read only

    try:
        head = git("rev-parse", "--short", "HEAD")
        changed = git("status", "--porcelain", "--untracked-files=no")
    except (OSError, subprocess.SubprocessError):
        return {"id": "unknown", "uncommitted_changes": None}
    if head.returncode:
        return {"id": "unknown", "uncommitted_changes": None}
    return {"id": head.stdout.strip(), "uncommitted_changes": bool(changed.stdout.strip())}


def fmt(value, digits: int = 1) -> str:
    if value is None:
        return "—"
    if isinstance(value, str):
        return value
    if isinstance(value, float):
        return f"{value:,.{digits}f}"
    return f"{value:,}"


def setup_name(report: dict[str, Any], name: str) -> str:
    """A setup in a few words: `SQLite ×1`, `PostgreSQL + Redis ×2`."""
    for setup in report["setups"]:
        if setup["name"] == name:
            return f"{'SQLite' if name == 'sqlite' else 'PostgreSQL + Redis'} ×{setup['processes']}"
    return name


def _p99(summary: dict[str, Any]) -> str:
    """A 99th percentile, or why there is none: too few samples (their number)."""
    if summary["ttft_p99_ms"] is None:
        return f"— (n={summary['ttft_samples']})"
    return fmt(summary["ttft_p99_ms"])


def writes_allowed(summary: dict[str, Any]) -> float | None:
    """The writes per run the baseline's server made for runs that streamed as long as these did."""
    runs = summary["per_stream"]
    if not runs:
        return None
    streamed = sum(run["streaming_s"] for run in runs) / len(runs)
    return BASELINE["db_writes_per_run"] + streamed * BASELINE["db_writes_per_streamed_s"]


def level_rows(report: dict[str, Any]) -> list[list[str]]:
    rows = [
        [
            "setup",
            "streams",
            "tokens/s",
            "runs",
            "tokens/stream",
            "TTFT direct p50 / p99 ms",
            "TTFT AgentChat p50 / p99 ms",
            "added p50 / p99 ms",
            "AgentChat p50 echo / run_started ms",
            "DB writes/run (allowed)",
            "server CPU ms/run",
            "collector ms (longest)",
            "peak RSS MB",
            "lost/dup/reordered/seq gaps",
        ]
    ]
    for level in report["levels"]:
        direct, chat = level["direct"], level["agentchat"]
        rows.append(
            [
                setup_name(report, level["setup"]),
                fmt(level["streams"]),
                f"{level['rate']:g}" + (" (stress)" if level["stress"] else ""),
                fmt(chat["runs"]),
                fmt(level["tokens_per_stream"]),
                f"{fmt(direct['ttft_p50_ms'])} / {_p99(direct)}",
                f"{fmt(chat['ttft_p50_ms'])} / {_p99(chat)}",
                f"{fmt(level['added_ttft_p50_ms'])} / {fmt(level['added_ttft_p99_ms'])}",
                f"{fmt(chat['echo_p50_ms'])} / {fmt(chat['run_started_p50_ms'])}",
                f"{fmt(chat['db_writes_per_run'])} ({fmt(writes_allowed(chat))})",
                fmt(chat["server_cpu_ms_per_run"]),
                f"{fmt(chat['collector']['ms'], 0)} ({fmt(chat['collector']['longest_ms'], 0)})",
                fmt(max(chat["peak_rss_mb"].values()) if chat["peak_rss_mb"] else None, 0),
                f"{chat['lost']}/{chat['duplicated']}/{chat['reordered']}/{chat['seq_problems']}",
            ]
        )
    return rows


def _markdown_table(rows: list[list[str]], left: tuple[int, ...] = (0,)) -> str:
    lines = ["| " + " | ".join(rows[0]) + " |"]
    lines.append("| " + " | ".join("---" if index in left else "---:" for index in range(len(rows[0]))) + " |")
    lines += ["| " + " | ".join(cell.replace("|", "\\|") for cell in row) + " |" for row in rows[1:]]
    return "\n".join(lines)


def capacity_text(capacity: dict[str, Any]) -> str:
    """`180`; `≥ 800` at the search's ceiling; `< 10` below its floor; `≥ 100, < 200` when its time ran out."""
    passed, failed = capacity["streams"], capacity["failed_at"]
    if failed is None:
        return f"≥ {passed}"
    if not passed:
        return f"< {failed}"
    return f"≥ {passed}, < {failed}" if capacity["cut_short"] else str(passed)


def clearly_more(two: dict[str, Any], one: dict[str, Any]) -> bool:
    """Whether capacity `two` is at least CLEARLY_MORE times `one`, taking for each the bound that makes it
    hardest: the fewest `two` is known to carry, and the most `one` may carry (below the fewest that failed when
    its search ran out of time; unbounded when nothing failed)."""
    if one["failed_at"] is None:
        return False
    most_one = one["failed_at"] - 1 if one["cut_short"] else one["streams"]
    return two["streams"] > 0 and two["streams"] >= CLEARLY_MORE * most_one


def _added(value: float | None) -> str:
    return "—" if value is None else f"{value:+,.0f}"


def _tried(capacity: dict[str, Any]) -> str:
    """What the search tried, in order: `50 ok (added p50 +30, p99 +41 ms), 100 no (added p50 +210, p99 +380 ms)`."""
    parts = []
    for entry in capacity["tried"]:
        why = f"added p50 {_added(entry['added_ttft_p50_ms'])}, p99 {_added(entry['added_ttft_p99_ms'])} ms"
        why += "" if entry["intact"] else ", runs not intact"
        parts.append(f"{entry['streams']} {'ok' if entry['ok'] else 'no'} ({why})")
    return ", ".join(parts) or "nothing"


def capacities(report: dict[str, Any]) -> list[dict[str, Any]]:
    """Every capacity search of the report: each setup's, and one process's alone where a setup has several."""
    return [setup[key] for setup in report["setups"] for key in ("capacity", "capacity_one_process") if setup.get(key)]


def capacity_lines(report: dict[str, Any]) -> list[str]:
    lines = []
    for setup in report["setups"]:
        named = setup_name(report, setup["name"])
        for capacity, name in (
            (setup.get("capacity"), named),
            (setup.get("capacity_one_process"), f"{named}, one process alone"),
        ):
            if capacity:
                lines.append(
                    f"{name}: {capacity_text(capacity)} concurrent streams "
                    f"(tried: {_tried(capacity)}{'; the time ran out' if capacity['cut_short'] else ''})"
                )
    return lines


def _grid(rows: list[list[str]], left: tuple[int, ...] = (0,)) -> str:
    widths = [max(len(row[index]) for row in rows) for index in range(len(rows[0]))]
    lines = [
        " | ".join(
            cell.ljust(width) if index in left else cell.rjust(width)
            for index, (cell, width) in enumerate(zip(row, widths, strict=True))
        )
        for row in rows
    ]
    lines.insert(1, "-+-".join("-" * width for width in widths))
    return "\n".join(lines)


def _pongs(window: dict[str, Any]) -> str:
    """The longest pong wait (ms), the pings, and how late the driver's own loop was at most (its share)."""
    lag = window.get("driver_loop_lag_max_ms")
    return f"{fmt(window['max_pong_wait_ms'])} ({window['pings']}; driver lag {fmt(lag)})"


def front_door_rows(front: dict[str, Any]) -> tuple[list[list[str]], list[list[str]]]:
    """The uploads, then the refused bodies, each with the longest pong wait on the other sockets meanwhile."""
    uploads = [
        ["upload", "bytes", "answer", "seconds to it", "what the server read or said", "longest pong wait ms (pings)"]
    ]
    for item in front.get("uploads", []):
        uploads.append(
            [
                item["format"].upper(),
                f"{item['size_bytes']:,} ({item['size_bytes'] / MiB:.2f} MiB)",
                f"{fmt(item['status'])} {item.get('code') or ''}".strip(),
                fmt(item["seconds"], 2),
                _read(item) if item["status"] == 201 else item.get("error", ""),
                _pongs(item),
            ]
        )
    refusals = [
        [
            "60 MB body",
            "sent before the answer",
            "answer",
            "ms to it",
            "then: all 60 MB pushed",
            "longest pong wait ms (pings): to the answer; to the end",
        ]
    ]
    for item in front.get("refusals", []):
        refusals.append(
            [
                item["body"],
                fmt(item["bytes_sent_before_answer"]),
                f"{fmt(item['status'])} {item.get('code') or item.get('error') or ''}".strip(),
                fmt(item["seconds_to_answer"] * 1000 if item["seconds_to_answer"] is not None else None),
                f"{item['bytes_sent']:,} bytes in {item['seconds']:.2f} s, {item['ended']}",
                f"{_pongs(item['to_the_answer'])}; {_pongs(item)}",
            ]
        )
    return uploads, refusals


def front_door_tables(front: dict[str, Any]) -> str:
    uploads, refusals = front_door_rows(front)
    return _grid(uploads, left=(0, 4)) + "\n\n" + _grid(refusals, left=(0, 4))


def search_rows(search: dict[str, Any]) -> list[list[str]]:
    """Each database's searches: what was looked for, how many conversations it found, how long the requests took."""
    rows = [["database", "search", "conversations found", "p50 ms", "p95 ms", "max ms"]]
    for database in search["databases"]:
        for item in database.get("searches", []):
            words = ", ".join(f"“{words}”" for words in item["searches"])
            rows.append(
                [
                    database["database"],
                    item["kind"] + (f": {words}" if words else ""),
                    fmt(item["conversations_found"]),
                    fmt(item["p50_ms"]),
                    fmt(item["p95_ms"]),
                    fmt(item["max_ms"]),
                ]
            )
    return rows


def search_lines(search: dict[str, Any]) -> list[str]:
    """What each database held and whether a search's queries read its index; or why it failed."""
    lines = []
    for database in search["databases"]:
        if database.get("error"):
            lines.append(f"{database['database']}: failed: {database['error']}")
            continue
        explained = database["explain"]
        lines.append(
            f"{database['database']}: {database['conversations']:,} conversations and {database['messages']:,} "
            f"messages of {database['users']} users, the searching user's {database['searcher_conversations']:,} "
            f"and {database['searcher_messages']:,}; migrated in {database['migrate_s']:.1f} s, seeded in "
            f"{database['seed_s']:.1f} s; {explained['index_used']} of the {explained['queries']} queries of a "
            "search that read messages read the search index"
        )
    return lines


def _searched_times(search: dict[str, Any]) -> int:
    return next((item["samples"] for database in search["databases"] for item in database.get("searches", [])), 0)


def _read(item: dict[str, Any]) -> str:
    """What the server says it read of an upload, in a few words."""
    meta = item.get("meta") or {}
    kind = item.get("kind")
    if kind == "pdf":
        return f"{meta.get('pages_read', 0):,} of {meta.get('pages', 0):,} pages read"
    if kind == "xlsx":
        sheets = meta.get("sheets") or [{}]
        return f"{meta.get('rows', 0):,} rows × {sheets[0].get('columns', 0)} columns"
    if kind == "csv":
        return f"{meta.get('rows', 0):,} rows × {meta.get('columns', 0)} columns"
    return ""


def targets(report: dict[str, Any]) -> list[dict[str, Any]]:
    """Each target, what it wants, what was measured and whether that meets it (None: not measured)."""
    checks = []

    def add(name: str, wanted: str, measured, met: bool | None, unit: str = "") -> None:
        checks.append({"target": name, "wanted": wanted, "measured": measured, "unit": unit, "met": met})

    sqlite = {
        level["streams"]: level for level in report["levels"] if level["setup"] == "sqlite" and not level["stress"]
    }
    for streams, percentile, bound in LATENCY_TARGETS:
        level = sqlite.get(streams)
        if level is None:
            continue
        value = level[f"added_ttft_p{percentile}_ms"]
        aim = f" (aim ≤ {AIM_ONE_STREAM_MS:g} ms)" if streams == 1 else ""
        add(
            f"added TTFT p{percentile}, {_streams(streams)}, SQLite, one process",
            f"≤ {bound:g} ms{aim}",
            value if value is not None else f"— (n={level['agentchat']['ttft_samples']})",
            value is not None and value <= bound,
            " ms",
        )

    setups = {setup["name"]: setup for setup in report["setups"]}
    one = setups.get("sqlite", {}).get("capacity")
    two = setups.get("scaled", {}).get("capacity")
    alone = setups.get("scaled", {}).get("capacity_one_process")
    for label, capacity in (
        ("SQLite, one process", one),
        ("PostgreSQL + Redis, two processes", two),
        ("PostgreSQL + Redis, one of its processes alone", alone),
    ):
        add(
            f"capacity, {label}: concurrent streams within added TTFT p50 and p99 ≤ {CAPACITY_ADDED_MS:g} ms, intact",
            "reported",
            capacity_text(capacity) if capacity else "not measured",
            None if capacity is None else not capacity["cut_short"],
        )
    for against, capacity in (("one on SQLite", one), ("one of them alone", alone)):
        add(
            f"two processes on PostgreSQL + Redis carry clearly more streams than {against}",
            f"≥ {CLEARLY_MORE:g} × as many",
            f"{capacity_text(two)} against {capacity_text(capacity)}" if capacity and two else "not measured",
            None if not (capacity and two) else clearly_more(two, capacity),
        )

    summaries = [level["agentchat"] for level in report["levels"]]
    tries = [entry for capacity in capacities(report) for entry in capacity["tried"]]
    probes = [entry["problems"] for entry in tries if entry["source"] == "probe"]
    problems = {
        key: sum(summary[key] for summary in summaries) + sum(entry[key] for entry in probes)
        for key in ("lost", "duplicated", "reordered", "foreign", "seq_problems", "unfinished")
    }
    add(
        "every token once and in order, every run completed (every level and capacity probe)",
        "0 lost / duplicated / reordered / seq gaps; 0 failed",
        ", ".join(f"{value} {key.replace('_', ' ')}" for key, value in problems.items()),
        not any(problems.values()) and all(intact(summary) for summary in summaries),
    )

    for level in report["levels"]:
        chat = level["agentchat"]
        value, allowed = chat["db_writes_per_run"], writes_allowed(chat)
        add(
            f"DB writes per run, {setup_name(report, level['setup'])}, {_streams(level['streams'])}"
            + (f" at {level['rate']:g} tokens/s" if level["stress"] else ""),
            f"≤ {fmt(allowed)} (as at {BASELINE['commit']}: {BASELINE['db_writes_per_run']:g} + 1 per 300 ms streamed)",
            value,
            value is not None and allowed is not None and value <= allowed,
        )
    if report.get("idle_sockets"):
        idle = report["idle_sockets"]
        value, baseline = idle["per_socket_kb"], BASELINE["idle_socket_kb"]
        add(
            f"RSS per idle authenticated socket ({idle['sockets']} open, {idle['failed']} failed)",
            f"≤ {baseline:g} KB + {BASELINE['idle_socket_noise']:.0%} (as at {BASELINE['commit']})",
            value,
            value is not None and value <= baseline * (1 + BASELINE["idle_socket_noise"]) and not idle["failed"],
            " KB",
        )
    front = report.get("front_door")
    if front:
        uploads = front.get("uploads", [])
        accepted = [item for item in uploads if item["status"] == 201]
        add(
            "a file of just under 10 MB of each format accepted (CSV, XLSX, PDF)",
            "201 each",
            ", ".join(f"{item['format']} {fmt(item['status'])}" for item in uploads),
            len(accepted) == len(uploads) == 3,
        )
        refusals = front.get("refusals", [])
        add(
            "a 60 MB body refused (declared, chunked)",
            "413 TOO_LARGE each",
            ", ".join(f"{item['body']} {fmt(item['status'])} {item.get('code') or ''}".strip() for item in refusals),
            len(refusals) == 2 and all((item["status"], item.get("code")) == (413, "TOO_LARGE") for item in refusals),
        )
        during = front.get("during_refusals") or {}
        value = during.get("max_pong_wait_ms")
        add(
            f"longest pong wait on another socket while 60 MB bodies are refused ({during.get('pings', 0)} pings)",
            f"≤ {PONG_WAIT_MS_REFUSING:,.0f} ms",
            value,
            value is not None and value <= PONG_WAIT_MS_REFUSING and not front.get("ping_errors"),
            " ms",
        )
    return checks


def _met(met: bool | None) -> str:
    return {True: "met", False: "NOT met", None: "n/a"}[met]


def _measured(check: dict[str, Any]) -> str:
    value = check["measured"]
    return fmt(value) + (check["unit"] if isinstance(value, int | float) else "")


def _streams(count: int) -> str:
    return f"{count} stream" + ("" if count == 1 else "s")


def chart(report: dict[str, Any], path: Path) -> None:
    """Added TTFT against concurrency for each setup, with the targets (left); both clients' TTFT (right)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, (left, right) = plt.subplots(1, 2, figsize=(12, 4.8))
    measured = []
    for setup in report["setups"]:
        levels = [level for level in report["levels"] if level["setup"] == setup["name"] and not level["stress"]]
        streams = [level["streams"] for level in levels]
        name = setup_name(report, setup["name"])
        for percentile, style in ((50, "o-"), (99, "s--")):
            values = [level[f"added_ttft_p{percentile}_ms"] for level in levels]
            measured += [value for value in values if value is not None]
            left.plot(streams, values, style, label=f"{name}, added p{percentile}")
            for x, y in zip(streams, values, strict=True):
                if y is not None:
                    left.annotate(f"{y:,.0f}", (x, y), textcoords="offset points", xytext=(6, -12), fontsize=8)
        if setup is report["setups"][0]:
            for side, label in (("direct", "direct"), ("agentchat", "AgentChat")):
                for percentile, style in ((50, "o-"), (99, "s--")):
                    values = [level[side][f"ttft_p{percentile}_ms"] for level in levels]
                    right.plot(streams, values, style, label=f"{label} p{percentile} ({name})")
    for percentile, marker in ((50, "k*"), (99, "kx")):
        points = [(streams, bound) for streams, p, bound in LATENCY_TARGETS if p == percentile]
        left.plot(*zip(*points, strict=True), marker, ms=11, label=f"p{percentile} target (SQLite ×1)")
    if measured and min(measured) > 0:
        left.set_yscale("log")
    else:
        left.set_yscale("symlog", linthresh=1)
    left.set(xscale="log", xlabel="concurrent streams", ylabel="ms more than the direct client")
    left.set_title("Added time to first token")
    left.grid(True, which="both", alpha=0.3)
    left.legend(fontsize=8)
    right.set(xscale="log", yscale="log", xlabel="concurrent streams", ylabel="ms")
    right.set_title("Time to first token, client clocks")
    right.grid(True, which="both", alpha=0.3)
    right.legend(fontsize=8)
    figure.suptitle(
        f"AgentChat bench — {report['machine']['cores']} cores — {_pacing(report)} — commit "
        f"{_commit(report)} — {report['started_at']}",
        fontsize=10,
    )
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)


def shown(path: Path) -> str:
    """A path relative to the project when it is inside it."""
    try:
        return str(path.resolve().relative_to(BASE_DIR))
    except ValueError:
        return str(path)


def _pacing(report: dict[str, Any]) -> str:
    config = report["config"]
    low, high = config["ttft_ms"]
    first = f"{low:g}–{high:g} ms" if high != low else f"{low:g} ms"
    return f"provider: first token {first}, {config['rate_tokens_per_s']:g} tokens/s a stream"


def _commit(report: dict[str, Any]) -> str:
    found = report["commit"]
    return found["id"] + (" with uncommitted changes" if found["uncommitted_changes"] else "")


def _loads(machine_figures: dict[str, Any]) -> str:
    start = machine_figures["load_average_at_start"][0]
    end = machine_figures.get("load_average_at_end", (float("nan"),))[0]
    return f"load average {start:.2f} at the start, {end:.2f} at the end"


def markdown(report: dict[str, Any]) -> str:
    """The latest figures as docs/benchmarks.md shows them: one dated section, with the commit it measured."""
    mach = report["machine"]
    date = dt.datetime.fromisoformat(report["started_at"]).date().isoformat()
    lines = [
        f"Measured on {date}, commit `{report['commit']['id']}`"
        + (" with uncommitted changes" if report["commit"]["uncommitted_changes"] else "")
        + f", in {report['duration_s'] / 60:.1f} minutes. Machine: {mach['cpu']}, {mach['cores']} cores, "
        f"{mach['memory_gb']} GB, Python {mach['python']} (the bench's reference loop of Python in "
        f"{mach['reference_loop_ms']:.0f} ms); {_loads(mach)}. Fake {_pacing(report)}; each stream's "
        "first token the same for both clients.",
    ]
    if report["levels"]:
        lines += ["", _markdown_table(level_rows(report))]
    capacities = capacity_lines(report)
    if capacities:
        lines += [
            "",
            f"Capacity, the most concurrent streams with added TTFT p50 and p99 ≤ {CAPACITY_ADDED_MS:g} ms and every "
            "token once and in order:",
            "",
            *[f"- {line}" for line in capacities],
        ]
    if report.get("idle_sockets"):
        idle = report["idle_sockets"]
        lines += ["", f"{idle['sockets']:,} idle authenticated sockets: {fmt(idle['per_socket_kb'])} KB each."]
    if report.get("front_door"):
        front = report["front_door"]
        uploads, refusals = front_door_rows(front)
        during = front["during_refusals"]
        lines += [
            "",
            f"The front door, on {front['server']}, with pings on {front['ping_sockets']} other authenticated sockets "
            "meanwhile:",
            "",
            _markdown_table(uploads, left=(0, 4)),
            "",
            _markdown_table(refusals, left=(0, 4)),
            "",
            f"From the first 60 MB body's head to the second's end: {fmt(during['max_pong_wait_ms'])} ms at most for "
            f"a pong ({during['pings']} pings). `/healthz` answered {front['healthz_after']} afterwards; the process "
            f"peaked at {front['peak_rss_mb']:.0f} MB meanwhile.",
        ]
    if report.get("search"):
        search = report["search"]
        lines += [
            "",
            "Search, through `GET /api/assistant/conversations/?search=…` (the first page of 20), each kind "
            f"{_searched_times(search)} times after a warm-up, in a process of its own:",
            "",
            _markdown_table(search_rows(search), left=(0, 1)),
            "",
            *[f"- {line}" for line in search_lines(search)],
        ]
    notes = _notes(report)
    if notes:
        lines += ["", *notes]
    if report["targets"]:
        rows = [["target", "wanted", "measured", "met"]]
        rows += [[c["target"], c["wanted"], _measured(c), _met(c["met"])] for c in report["targets"]]
        lines += ["", _markdown_table(rows, left=(0, 1, 2, 3))]
    return "\n".join(lines)


def _notes(report: dict[str, Any]) -> list[str]:
    """What was skipped, failed or left unfinished."""
    lines = []
    for key, what in (("skipped_setups", "setups"), ("skipped_levels", "levels")):
        if report.get(key):
            lines.append(f"skipped for the time budget ({what}): {', '.join(report[key])}")
    if report.get("failure"):
        lines.append(f"the bench stopped early: {report['failure']}")
    for level in report["levels"]:
        where = f"{setup_name(report, level['setup'])}, {_streams(level['streams'])}"
        for side in ("direct", "agentchat"):
            if level[side]["unfinished"]:
                lines.append(
                    f"{where}, {side}: {level[side]['unfinished']} streams failed or unfinished when the client "
                    f"gave up, {level[side]['undelivered']} of their tokens undelivered"
                )
            if level[side]["errors"]:
                lines.append(f"{where}, {side}: errors {level[side]['errors']}")
    return lines


def render(report: dict[str, Any], paths: list[Path | None]) -> str:
    mach = report["machine"]
    lines = [
        "",
        f"AgentChat bench — commit {_commit(report)} — "
        + (", ".join(s["mode"] for s in report["setups"]) or "no streams"),
        f"machine: {mach['cpu']} × {mach['cores']} cores, {mach['memory_gb']} GB, Python {mach['python']} "
        f"(reference loop {mach['reference_loop_ms']:.0f} ms); {_loads(mach)}",
        f"fake {_pacing(report)}; all figures from the clients' clocks; took {report['duration_s']:.0f} s",
        "",
    ]
    if report["levels"]:
        lines += [_grid(level_rows(report)), ""]
    for level in report["levels"]:
        chat = level["agentchat"]
        lines.append(
            f"{setup_name(report, level['setup'])}, {_streams(level['streams'])} at {level['rate']:g} tokens/s: "
            f"server CPU {fmt(sum(chat['server_cpu_s'].values()))} s "
            f"({fmt((chat['server_cpu_share'] or 0) * 100, 0)}% of a core per process while AgentChat streamed)"
        )
    capacities = capacity_lines(report)
    if capacities:
        lines += [
            "",
            f"capacity (added TTFT p50 and p99 ≤ {CAPACITY_ADDED_MS:g} ms, every token once and in order):",
        ]
        lines += [f"  {line}" for line in capacities]
    if report.get("idle_sockets"):
        idle = report["idle_sockets"]
        lines.append(
            f"idle sockets: {idle['sockets']} on {idle['process']}: RSS {idle['rss_before_mb']:.1f} → "
            f"{idle['rss_after_mb']:.1f} MB = {fmt(idle['per_socket_kb'])} KB per socket "
            f"(opened and authenticated in {idle['open_and_auth_s']:.1f} s)"
        )
        if idle["failed"]:
            lines.append(f"idle sockets: {idle['failed']} did not open, e.g. {idle['first_failure']}")
    if report.get("front_door"):
        front = report["front_door"]
        lines += [
            "",
            f"front door, on {front['server']}: files made in {front['files_made_s']:.1f} s, uploaded one after the "
            f"other; pings on {front['ping_sockets']} other authenticated sockets meanwhile "
            f"({fmt(front['pings_before']['max_pong_wait_ms'])} ms longest before anything else happened)",
            front_door_tables(front),
            f"longest pong wait from the first 60 MB body's head to the second's end: "
            f"{fmt(front['during_refusals']['max_pong_wait_ms'])} ms ({front['during_refusals']['pings']} pings); "
            f"peak RSS {front['peak_rss_mb']:.0f} MB; /healthz afterwards {front['healthz_after']}",
            "",
        ]
        if front.get("ping_errors"):
            lines.append(f"front door: ping errors {front['ping_errors']}")
    for setup in report["setups"]:
        if setup.get("peak_rss_mb"):
            peaks = ", ".join(f"{name} {mb:.0f} MB" for name, mb in setup["peak_rss_mb"].items())
            lines.append(f"peak RSS over the streams, {setup['mode']}: {peaks}")
    if report.get("search"):
        search = report["search"]
        lines += ["", f"search through the API, each kind {_searched_times(search)} times after a warm-up:"]
        lines += [_grid(search_rows(search), left=(0, 1)), *search_lines(search)]
    lines += _notes(report)
    if report["targets"]:
        lines += ["", "targets:"]
    for check in report["targets"]:
        met, measured = _met(check["met"]), _measured(check)
        lines.append(f"  {met:>7}  {check['target']}: {measured} (wanted {check['wanted']})")
    if report.get("profile"):
        profile = report["profile"]
        lines += ["", f"py-spy, {profile['streams']} streams, {profile['samples']} samples of the first daphne:"]
        lines.append(f"  threads (busy: the share of the {profile['seconds']:.1f} s it was running, not waiting):")
        for thread in profile["threads"][:6]:
            busy = f"busy {thread['busy'] * 100:3.0f}%, " if thread["busy"] is not None else ""
            lines.append(f"    {busy}{thread['share'] * 100:5.1f}% of the samples  {thread['thread']}")
        for title, key in (
            ("own time", "self"),
            ("inside (inclusive)", "inclusive"),
            ("this project's code", "product"),
        ):
            lines.append(f"  {title}:")
            lines += [f"    {spot['share'] * 100:5.1f}%  {spot['function']}" for spot in profile[key][:10]]
    lines += ["", "results: " + ", ".join(shown(path) for path in paths if path is not None)]
    return "\n".join(lines)
