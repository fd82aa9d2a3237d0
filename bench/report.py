"""What the bench prints and writes: the table, the targets, the chart, the profile's hot spots."""

from __future__ import annotations

import contextlib
import os
import platform
import re
from pathlib import Path
from typing import Any

BASE_DIR = Path(__file__).resolve().parent.parent
TARGETS = {
    "added_ttft_p50_1": 3.0,
    "added_ttft_p50_500": 25.0,
    "tokens_per_s_per_process_50": 20_000,
    "idle_socket_kb": 64.0,
    # The longest another person's socket may wait for a pong while a 60 MB body is refused (the front-door tests').
    "pong_wait_ms_refusing": 1000.0,
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
        "system": platform.platform(),
        "load_average_at_start": os.getloadavg(),
    }


def fmt(value, digits: int = 1) -> str:
    if value is None:
        return "—"
    if isinstance(value, str):
        return value
    if isinstance(value, float):
        return f"{value:,.{digits}f}"
    return f"{value:,}"


def table(report: dict[str, Any]) -> str:
    header = [
        "streams",
        "runs",
        "tok/stream",
        "TTFT direct p50/p99 ms",
        "TTFT AgentChat p50/p99 ms",
        "added p50/p99 ms",
        "tok/s direct",
        "tok/s per process",
        "frames/s",
        "DB writes/run (allowed)",
        "peak RSS MB",
        "lost/dup/reord/seq",
    ]
    rows = [header]
    for level in report["levels"]:
        direct, chat = level["direct"], level["agentchat"]
        rows.append(
            [
                fmt(level["streams"]),
                fmt(level["streams"] * level.get("rounds", 1)),
                fmt(level["tokens_per_stream"]),
                f"{fmt(direct['ttft_p50_ms'])} / {fmt(direct['ttft_p99_ms'])}",
                f"{fmt(chat['ttft_p50_ms'])} / {fmt(chat['ttft_p99_ms'])}",
                f"{fmt(level['added_ttft_p50_ms'])} / {fmt(level['added_ttft_p99_ms'])}",
                fmt(direct["tokens_per_s"], 0),
                fmt(chat["tokens_per_s_per_process"], 0),
                fmt(chat["frames_per_s"], 0),
                f"{fmt(chat['db_writes_per_run'])} ({fmt(chat['db_writes_allowed_per_run'])})",
                fmt(max(chat["peak_rss_mb"].values()) if chat["peak_rss_mb"] else None, 0),
                f"{chat['lost']}/{chat['duplicated']}/{chat['reordered']}/{chat['seq_problems']}",
            ]
        )
    widths = [max(len(row[index]) for row in rows) for index in range(len(header))]
    lines = [" | ".join(cell.rjust(width) for cell, width in zip(row, widths, strict=True)) for row in rows]
    lines.insert(1, "-+-".join("-" * width for width in widths))
    return "\n".join(lines)


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


def front_door_tables(front: dict[str, Any]) -> str:
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
    return _grid(uploads, left=(0, 4)) + "\n\n" + _grid(refusals, left=(0, 4))


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
    by_streams = {level["streams"]: level for level in report["levels"]}
    checks = []

    def add(name: str, target: str, measured, met: bool | None) -> None:
        checks.append({"target": name, "wanted": target, "measured": measured, "met": met})

    if 1 in by_streams:
        value = by_streams[1]["added_ttft_p50_ms"]
        add("added TTFT p50, 1 stream", "≤ 3 ms", value, value is not None and value <= TARGETS["added_ttft_p50_1"])
    if 500 in by_streams:
        value = by_streams[500]["added_ttft_p50_ms"]
        wanted = TARGETS["added_ttft_p50_500"]
        processes = report.get("processes", 1)
        where = "one process" if processes == 1 else f"{processes} processes: the target is for one"
        add(f"added TTFT p50, 500 streams ({where})", "≤ 25 ms", value, value is not None and value <= wanted)
    if 50 in by_streams:
        chat = by_streams[50]["agentchat"]
        value = chat["tokens_per_s_per_process"]
        intact = chat["streams_with_integrity_problems"] == 0 and chat["completed"] == chat["streams"]
        wanted = TARGETS["tokens_per_s_per_process_50"]
        add(
            "tokens/s per process, 50 streams, none lost", "≥ 20,000", value, bool(value and value >= wanted and intact)
        )
    problems = {
        key: sum(level["agentchat"][key] for level in report["levels"])
        for key in ("lost", "duplicated", "reordered", "foreign", "seq_problems", "unfinished")
    }
    add(
        "every token once and in order, every run completed (all levels)",
        "0 lost / duplicated / reordered / seq gaps; 0 failed",
        ", ".join(f"{value} {key.replace('_', ' ')}" for key, value in problems.items()),
        not any(problems.values()),
    )
    for level in report["levels"]:
        chat = level["agentchat"]
        value, allowed = chat["db_writes_per_run"], chat["db_writes_allowed_per_run"]
        add(
            f"DB writes per run, {level['streams']} streams",
            f"≤ {fmt(allowed)} (1 per 300 ms streamed + 5)",
            value,
            value is not None and value <= allowed,
        )
    if report.get("idle_sockets"):
        idle = report["idle_sockets"]
        value = idle["per_socket_kb"]
        wanted = TARGETS["idle_socket_kb"]
        met = value is not None and value <= wanted and not idle["failed"]
        add(
            f"RSS per idle authenticated socket ({idle['sockets']} open, {idle['failed']} failed)",
            "≤ 64 KB",
            value,
            met,
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
            "≤ 1,000 ms",
            value,
            value is not None and value <= TARGETS["pong_wait_ms_refusing"] and not front.get("ping_errors"),
        )
    return checks


def chart(report: dict[str, Any], path: Path) -> None:
    """Added TTFT against concurrency (left), and both clients' TTFT (right)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    levels = report["levels"]
    streams = [level["streams"] for level in levels]
    figure, (left, right) = plt.subplots(1, 2, figsize=(12, 4.8))
    added = {
        "added TTFT p50": [level["added_ttft_p50_ms"] for level in levels],
        "added TTFT p99": [level["added_ttft_p99_ms"] for level in levels],
    }
    for (label, values), style, offset in zip(added.items(), ("o-", "s--"), ((6, -12), (6, 5)), strict=True):
        left.plot(streams, values, style, label=label)
        for x, y in zip(streams, values, strict=True):
            if y is not None:
                left.annotate(f"{y:,.0f}", (x, y), textcoords="offset points", xytext=offset, fontsize=8)
    left.plot([1, 500], [TARGETS["added_ttft_p50_1"], TARGETS["added_ttft_p50_500"]], "k*", ms=11, label="p50 target")
    measured = [value for values in added.values() for value in values if value is not None]
    if measured and min(measured) > 0:
        left.set_yscale("log")
    else:
        left.set_yscale("symlog", linthresh=1)
    left.set(xscale="log", xlabel="concurrent streams", ylabel="ms more than the direct openai client")
    left.set_title("Added time to first token")
    left.grid(True, which="both", alpha=0.3)
    left.legend(fontsize=8)
    for side, name in (("direct", "direct openai"), ("agentchat", "AgentChat")):
        right.plot(streams, [level[side]["ttft_p50_ms"] for level in levels], "o-", label=f"{name} p50")
        right.plot(streams, [level[side]["ttft_p99_ms"] for level in levels], "s--", label=f"{name} p99")
    right.set(xscale="log", yscale="log", xlabel="concurrent streams", ylabel="ms")
    right.set_title("Time to first token, client clocks")
    right.grid(True, which="both", alpha=0.3)
    right.legend(fontsize=8)
    config = report["config"]
    figure.suptitle(
        f"AgentChat bench — {report['mode']} — {report['machine']['cores']} cores — provider TTFT "
        f"{config['ttft_ms']:g} ms, {config['rate_tokens_per_s']:g} tok/s — {report['started_at']}",
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


def render(report: dict[str, Any], json_path: Path, png_path: Path | None) -> str:
    config, mach = report["config"], report["machine"]
    lines = [
        "",
        f"AgentChat bench — {report['mode']}",
        f"machine: {mach['cpu']} × {mach['cores']} cores, {mach['memory_gb']} GB, Python {mach['python']}; "
        f"load average {', '.join(f'{x:.2f}' for x in mach['load_average_at_start'])} at start, "
        f"{', '.join(f'{x:.2f}' for x in mach.get('load_average_at_end', ()))} at the end",
        f"fake provider: TTFT {config['ttft_ms']:g} ms, {config['rate_tokens_per_s']:g} tokens/s per stream; "
        f"all figures from the clients' clocks; took {report['duration_s']:.0f} s",
        "",
        table(report),
        "",
    ]
    for level in report["levels"]:
        chat = level["agentchat"]
        lines.append(
            f"{level['streams']} streams, AgentChat p50 from sending the message: echo {fmt(chat['echo_p50_ms'])} ms, "
            f"run_started {fmt(chat['run_started_p50_ms'])} ms, first token {fmt(chat['ttft_p50_ms'])} ms; "
            f"server CPU {fmt(sum(chat['server_cpu_s'].values()))} s "
            f"({fmt((chat['server_cpu_share'] or 0) * 100, 0)}% of a core per process)"
        )
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
    if report.get("skipped_levels"):
        lines.append(f"skipped for the time budget: {', '.join(map(str, report['skipped_levels']))} streams")
    if report.get("failure"):
        lines.append(f"the bench stopped early: {report['failure']}")
    if report.get("peak_rss_mb"):
        peaks = ", ".join(f"{name} {mb:.0f} MB" for name, mb in report["peak_rss_mb"].items())
        lines.append(f"peak RSS over the whole run: {peaks}")
    for level in report["levels"]:
        for side in ("direct", "agentchat"):
            if level[side]["unfinished"]:
                lines.append(
                    f"{level['streams']} streams, {side}: {level[side]['unfinished']} streams failed or unfinished "
                    f"when the client gave up, {level[side]['undelivered']} of their tokens undelivered"
                )
            if level[side]["errors"]:
                lines.append(f"{level['streams']} streams, {side}: errors {level[side]['errors']}")
    lines += ["", "targets:"]
    for check in report["targets"]:
        mark = "met" if check["met"] else "NOT met"
        lines.append(f"  {mark:>7}  {check['target']}: {fmt(check['measured'])} (wanted {check['wanted']})")
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
    lines += ["", f"results: {shown(json_path)}" + (f", {shown(png_path)}" if png_path else "")]
    return "\n".join(lines)
