"""The bench harness's own parts (make bench): the fake provider's pacing, the no-loss check, the write counter,
the p99 rule, the order of the legs, the capacity search, the exit code and the markdown."""

from __future__ import annotations

import asyncio
import gc
import re
import time
from pathlib import Path
from types import SimpleNamespace

import openai
import pytest

from bench.checks import MIN_P99_SAMPLES, bracket, check_stream, next_probe, percentile, within_capacity
from bench.clients import StreamPlan, StreamResult, direct_client, direct_stream
from bench.fake_provider import Pace, _reply_for, expected_text, prompt, serve, token
from bench.measures import collector_summary, summarize
from bench.report import capacity_lines, clearly_more, hot_spots, markdown, render, targets
from bench.run import CapacitySearch, exit_code, parse_args, round_order, search_capacities
from bench.server import CollectorWatch, WriteCounter


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


async def test_direct_leg_reads_each_stream_whole_and_times_its_first_token(provider):
    client = direct_client(provider)
    start = asyncio.Event()
    plans = [StreamPlan(f"p{index}", 30, Pace(ttft=0.05, rate=1000)) for index in range(20)]
    streams = [asyncio.create_task(direct_stream(client, plan, start, timeout=10)) for plan in plans]
    start.set()
    try:
        results = await asyncio.gather(*streams)
    finally:
        await client.close()
    for plan, result in zip(plans, results, strict=True):
        assert "".join(result.tokens_text) == expected_text(plan.tag("direct"), 30)
        assert (result.status, result.error, result.integrity.ok) == ("completed", "", True)
        assert 0.05 <= result.ttft < 10


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
        'SELECT "id" FROM "conversations_message" FOR UPDATE',
        'WITH gate AS (UPDATE "conversations_conversation" SET x = 1 RETURNING 1), '
        'stored AS (INSERT INTO "conversations_message" ("content") SELECT * FROM (VALUES (%s)) AS new RETURNING id) '
        "SELECT id FROM stored",
        'WITH seen AS (SELECT "id" FROM "conversations_message" FOR UPDATE OF "conversations_message") SELECT 1',
        "BEGIN IMMEDIATE",
        "SAVEPOINT s1",
    ):
        counter.see(sql)
    assert counter.snapshot() == {
        "INSERT conversations_message": 2,
        "UPDATE conversations_message": 1,
        "UPDATE conversations_conversation": 2,
        "DELETE conversations_message": 1,
    }


def test_collector_watch_times_each_pass_of_the_collector():
    watch = CollectorWatch()
    try:
        gc.collect(0)
        gc.collect(2)
    finally:
        gc.callbacks.remove(watch._seen)
    assert [generation for generation, _ in watch.passes[-2:]] == [0, 2]
    assert all(ms >= 0 for _, ms in watch.passes)


def test_collector_summary_takes_the_passes_since_before_of_every_server():
    before = {"daphne-a": [[0, 1.0]], "daphne-b": []}
    after = {"daphne-a": [[0, 1.0], [0, 2.5], [2, 40.0]], "daphne-b": [[1, 7.5]]}
    assert collector_summary(after, before) == {"passes_by_generation": [1, 1, 1], "ms": 50.0, "longest_ms": 40.0}


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


# --- pacing ----------------------------------------------------------------------------------------


def test_each_stream_gets_a_first_token_time_of_the_range_fixed_by_its_name():
    pace = Pace(ttft=0.02, rate=50, ttft_max=0.05)
    points = [pace.for_stream(f"50r0x{index}").ttft for index in range(200)]
    assert all(0.02 <= point <= 0.05 for point in points)
    assert max(points) - min(points) > 0.025  # spread over the range, not bunched
    assert pace.for_stream("50r1x7") == pace.for_stream("50r1x7")
    assert Pace(ttft=0.05).for_stream("any").ttft == 0.05


def test_the_message_carries_the_pace_and_both_legs_ask_for_the_same():
    plan = StreamPlan("50r0x3", 100, Pace(ttft=0.02, rate=50, ttft_max=0.05).for_stream("50r0x3"))
    provider_pace = Pace(ttft=0.5, rate=500, tick=0.002)
    paces = []
    for leg in ("direct", "agentchat"):
        tag, count, pace = _reply_for({"messages": [{"role": "user", "content": plan.prompt(leg)}]}, provider_pace)
        assert (tag, count) == (plan.tag(leg), 100)
        paces.append(pace)
    assert paces[0] == paces[1]
    assert paces[0].ttft == pytest.approx(plan.pace.ttft, abs=1e-6) and paces[0].rate == 50
    assert paces[0].tick == provider_pace.tick
    # The short form still works, at the provider's own pace.
    assert _reply_for({"messages": [{"role": "user", "content": prompt("t", 7)}]}, provider_pace) == (
        "t",
        7,
        provider_pace,
    )


async def test_fake_provider_keeps_the_pace_the_message_asks_for(provider):
    client = openai.AsyncOpenAI(api_key="sk-test", base_url=provider, max_retries=0, timeout=10)
    try:
        started = time.perf_counter()
        stream = await client.chat.completions.create(
            model="m",
            messages=[{"role": "user", "content": prompt("t", 5, Pace(ttft=0.15, rate=20))}],
            stream=True,
        )
        stamps = [time.perf_counter() async for chunk in stream if chunk.choices and chunk.choices[0].delta.content]
    finally:
        await client.close()
    assert len(stamps) == 5
    assert stamps[0] - started >= 0.15  # not the fixture's 50 ms
    assert stamps[-1] - started >= 0.15 + 4 / 20


# --- the levels ------------------------------------------------------------------------------------


def _result(tag: str, ttft: float, count: int = 3, lose: int = 0, status: str = "completed") -> StreamResult:
    result = StreamResult(sent=10.0, first_token=10.0 + ttft, last_token=10.5, finished=10.6, status=status)
    result.integrity = check_stream(expected_text(tag, count - lose), tag, count)
    return result


def test_p99_is_given_only_from_enough_samples():
    few = summarize([[_result(f"a{index}", 0.01 * index) for index in range(MIN_P99_SAMPLES - 1)]])
    assert few["ttft_p99_ms"] is None and few["ttft_samples"] == MIN_P99_SAMPLES - 1
    assert few["ttft_p50_ms"] is not None
    rounds = [[_result(f"a{r}x{index}", 0.001 * (r * 50 + index)) for index in range(50)] for r in range(2)]
    enough = summarize(rounds)
    assert enough["ttft_samples"] == MIN_P99_SAMPLES and enough["ttft_p99_ms"] == pytest.approx(98.01)
    assert (enough["streams"], enough["rounds"], enough["runs"]) == (50, 2, 100)


def test_legs_take_turns_round_by_round():
    assert [round_order(index) for index in range(4)] == [
        ["direct", "agentchat"],
        ["agentchat", "direct"],
        ["direct", "agentchat"],
        ["agentchat", "direct"],
    ]


# --- the capacity search ---------------------------------------------------------------------------


def _search(capacity: int, known: dict[int, bool] | None = None, most: int = 800) -> tuple[list[int], tuple]:
    results = dict(known or {})
    tried = []
    while (streams := next_probe(*bracket(results), start=50, most=most)) is not None:
        tried.append(streams)
        results[streams] = streams <= capacity
    return tried, bracket(results)


def test_capacity_search_doubles_then_halves_the_gap_to_about_ten_percent():
    tried, (passed, failed) = _search(330)
    assert tried[:4] == [50, 100, 200, 400]
    assert passed <= 330 < failed and failed <= passed * 1.1 + 1
    assert len(tried) <= 9


def test_capacity_search_starts_from_what_the_levels_found():
    tried, (passed, failed) = _search(120, known={10: True, 50: True, 200: False})
    assert tried[0] == 125 and passed <= 120 < failed


def test_capacity_search_stops_at_its_ceiling_and_its_floor():
    assert _search(5000) == ([50, 100, 200, 400, 800], (800, None))
    tried, result = _search(3, known={10: False})
    assert tried == [] and result == (0, 10)
    tried, result = _search(3)
    assert tried == [50, 25, 12, 10] and result == (0, 10)


class _Carries(CapacitySearch):
    """A search whose probes a server of a known capacity answers; each probe noted in `order`."""

    def __init__(self, name: str, capacity: int, order: list[tuple[str, int]], left: float = 1000.0):
        bench = SimpleNamespace(args=SimpleNamespace(capacity_max=800), left=lambda: left)
        super().__init__(bench, name)
        self.capacity, self.order = capacity, order

    async def probe(self, streams: int) -> None:
        self.order.append((self.name, streams))
        self.results[streams] = streams <= self.capacity


async def test_the_setups_capacity_searches_take_turns_in_alternating_order():
    order: list[tuple[str, int]] = []
    one, two, alone = _Carries("sqlite", 120, order), _Carries("scaled", 330, order), _Carries("alone", 60, order)
    await search_capacities([one, two, alone], budget=600)
    # Each turn one probe of each search still going, the order the other way round every other turn.
    assert order == [
        ("sqlite", 50), ("scaled", 50), ("alone", 50),
        ("alone", 100), ("scaled", 100), ("sqlite", 100),
        ("sqlite", 200), ("scaled", 200), ("alone", 75),
        ("alone", 62), ("scaled", 400), ("sqlite", 150),
        ("sqlite", 125), ("scaled", 300), ("alone", 56),
        ("scaled", 350), ("sqlite", 112),
        ("sqlite", 118), ("scaled", 325),
    ]  # fmt: skip
    for search, capacity in ((one, 120), (two, 330), (alone, 60)):
        found = search.outcome()
        assert found["streams"] <= capacity < found["failed_at"] <= found["streams"] * 1.1 + 1
        assert not found["cut_short"]


async def test_a_capacity_search_out_of_time_says_so_and_the_others_go_on():
    order: list[tuple[str, int]] = []
    short, going = _Carries("short", 120, order, left=10.0), _Carries("going", 120, order)
    await search_capacities([short, going], budget=600)
    assert [name for name, _ in order] == ["going"] * len(order) and len(order) > 3
    assert short.outcome() == {"streams": 0, "failed_at": None, "cut_short": True, "tried": []}
    order.clear()
    spent = _Carries("spent", 120, order)
    await search_capacities([spent], budget=0)
    assert order == [] and spent.outcome()["cut_short"]


# --- the exit code and the report ------------------------------------------------------------------


def _level(streams: int, rounds: int, setup: str = "sqlite", lose: int = 0, fail: bool = False) -> dict:
    legs = {}
    for side in ("direct", "agentchat"):
        rows = [
            [
                _result(f"{side[0]}{r}x{index}", 0.03 + 0.0001 * index, lose=lose if side == "agentchat" else 0)
                for index in range(streams)
            ]
            for r in range(rounds)
        ]
        if fail and side == "agentchat":
            rows[-1][-1] = _result("failed", 0.03, status="failed")
        legs[side] = summarize(rows)
    legs["agentchat"].update(
        {
            "db_writes_per_run": 15.0,
            "peak_rss_mb": {"daphne-a": 200.0},
            "server_cpu_s": {"daphne-a": 1.25},
            "server_cpu_ms_per_run": 12.5,
            "collector": {"passes_by_generation": [3, 1, 0], "ms": 41.0, "longest_ms": 24.0},
        }
    )
    return {
        "setup": setup,
        "streams": streams,
        "rounds": rounds,
        "tokens_per_stream": 3,
        "rate": 50.0,
        "stress": False,
        "direct": legs["direct"],
        "agentchat": legs["agentchat"],
        "added_ttft_p50_ms": legs["agentchat"]["ttft_p50_ms"] - legs["direct"]["ttft_p50_ms"],
        "added_ttft_p99_ms": None,
    }


@pytest.mark.parametrize(
    ("p50", "p99", "carried"),
    [
        (90.0, 240.0, True),
        (90.0, 260.0, False),
        # A stall in the direct round: its tail outgrew AgentChat's, while AgentChat added 408 ms at the median.
        (408.0, -680.0, False),
        (90.0, None, False),
    ],
)
def test_a_probe_is_carried_only_with_its_added_median_and_p99_within_the_bound(p50, p99, carried):
    level = _level(50, 2) | {"added_ttft_p50_ms": p50, "added_ttft_p99_ms": p99}
    assert within_capacity(level) is carried
    assert within_capacity(_level(50, 2, fail=True) | {"added_ttft_p50_ms": 90.0, "added_ttft_p99_ms": 240.0}) is False


def _report(*levels: dict, probes: tuple = ()) -> dict:
    capacity = {"streams": 0, "failed_at": None, "cut_short": False, "tried": list(probes)}
    report = {
        "started_at": "2026-12-01T10:00:00+00:00",
        "commit": {"id": "abc1234", "uncommitted_changes": False},
        "machine": {
            "cpu": "CPU",
            "cores": 2,
            "memory_gb": 8.0,
            "python": "3.11.7",
            "reference_loop_ms": 41.3,
            "load_average_at_start": (0.5, 0.5, 0.5),
            "load_average_at_end": (1.0, 1.0, 1.0),
        },
        "config": {"ttft_ms": (20.0, 50.0), "rate_tokens_per_s": 50.0},
        "duration_s": 300.0,
        "setups": [{"name": "sqlite", "mode": "SQLite", "processes": 1, "capacity": capacity}],
        "levels": list(levels),
    }
    report["targets"] = targets(report)
    return report


def _probe(lost: int = 0) -> dict:
    problems = {"lost": lost, "duplicated": 0, "reordered": 0, "foreign": 0, "seq_problems": 0, "unfinished": 0}
    return {"streams": 100, "source": "probe", "intact": not lost, "problems": problems, "ok": False}


def test_strict_exits_0_for_a_perfect_report_with_rounds():
    report = _report(_level(1, 10), _level(50, 2), probes=(_probe(),))
    assert exit_code(report, strict=True) == 0


def test_strict_exits_1_when_a_run_failed_or_lost_a_token():
    assert exit_code(_report(_level(1, 10), _level(50, 2, lose=1)), strict=True) == 1
    assert exit_code(_report(_level(1, 10, fail=True)), strict=True) == 1
    assert exit_code(_report(_level(1, 10), probes=(_probe(lost=1),)), strict=True) == 1


def test_without_strict_exits_0_once_measured_and_1_when_the_bench_stopped_early():
    assert exit_code(_report(_level(1, 10, lose=1)), strict=False) == 0
    stopped = _report(_level(1, 10)) | {"failure": "RuntimeError('daphne-a exited')"}
    assert exit_code(stopped, strict=False) == 1


def _capacity(passed: int, failed: int | None, cut_short: bool = False) -> dict:
    return {"streams": passed, "failed_at": failed, "cut_short": cut_short, "tried": []}


def test_two_processes_carry_clearly_more_only_against_the_most_one_may_carry():
    assert clearly_more(_capacity(63, 69), _capacity(50, 54))
    assert not clearly_more(_capacity(62, 68), _capacity(50, 54))
    # One's search ran out of time between 21 and 25: it may carry 24, and 28 is not 1.25 times that.
    assert not clearly_more(_capacity(28, 31), _capacity(21, 25, cut_short=True))
    assert clearly_more(_capacity(30, 33), _capacity(21, 25, cut_short=True))
    # Nothing failed on one process (the search's ceiling): it may carry any number.
    assert not clearly_more(_capacity(800, None), _capacity(800, None))
    assert clearly_more(_capacity(12, 14), _capacity(0, 10))


def test_two_processes_are_held_against_one_on_sqlite_and_against_one_of_them_alone():
    report = _report()
    scaled = {"name": "scaled", "mode": "PostgreSQL + Redis", "processes": 2, "capacity": _capacity(200, 225)}
    scaled["capacity_one_process"] = _capacity(137, 150)
    report["setups"] = [{"name": "sqlite", "mode": "SQLite", "processes": 1, "capacity": _capacity(181, 200)}, scaled]
    checks = {check["target"]: (check["measured"], check["met"]) for check in targets(report)}
    against = "two processes on PostgreSQL + Redis carry clearly more streams than "
    assert checks[against + "one on SQLite"] == ("200 against 181", False)
    assert checks[against + "one of them alone"] == ("200 against 137", True)
    assert "PostgreSQL + Redis ×2, one process alone: 137 concurrent streams (tried: nothing)" in capacity_lines(report)

    assert exit_code(report, strict=True) == 0
    scaled["capacity_one_process"]["tried"] = [_probe(lost=1)]
    assert exit_code(report, strict=True) == 1


def test_markdown_has_one_dated_table_with_its_commit():
    text = markdown(_report(_level(1, 10), _level(50, 2)))
    assert text.startswith("Measured on 2026-12-01, commit `abc1234`")
    headers = [line for line in text.splitlines() if line.startswith("| setup |")]
    assert len(headers) == 1
    assert re.search(r"^\| SQLite ×1 \| 50 \| 50 \| 100 \| 3 \|", text, re.MULTILINE)
    assert "— (n=10)" in text  # one stream, ten rounds: no p99
    assert "Python 3.11.7 (the bench's reference loop of Python in 41 ms)" in text
    assert re.search(r"\| DB writes/run \(allowed\) \| server CPU ms/run \| collector ms \(longest\) \|", text)
    assert re.search(r"\| 15\.0 \([\d.]+\) \| 12\.5 \| 41 \(24\) \|", text)


# --- the search ------------------------------------------------------------------------------------


def _searched(kind: str, searches: list[str], found: int, p50: float) -> dict:
    return {
        "kind": kind,
        "searches": searches,
        "conversations_found": found,
        "with_snippet": min(found, 20),
        "samples": 20,
        "p50_ms": p50,
        "p95_ms": p50 * 1.5,
        "max_ms": p50 * 2,
    }


def _search_report() -> dict:
    sqlite = {
        "database": "SQLite",
        "users": 10,
        "conversations": 10_000,
        "messages": 200_000,
        "searcher_conversations": 1_000,
        "searcher_messages": 20_000,
        "migrate_s": 1.2,
        "seed_s": 11.7,
        "searches": [
            _searched("the list, no search", [], 1_000, 40.0),
            _searched("rare word (~0.1%)", ["zeppelin", "жираф"], 13, 20.0),
        ],
        "explain": {"queries": 3, "index_used": 3, "plans": ["…"]},
    }
    report = _report() | {"search": {"databases": [sqlite, {"database": "PostgreSQL", "error": "not done"}]}}
    report["targets"] = []  # as `--only search` leaves them: no streams were measured
    return report


def test_only_search_turns_the_search_on():
    assert parse_args([]).search is True and parse_args([]).only is None
    assert parse_args(["--no-search"]).search is False
    assert parse_args(["--only", "search", "--no-search"]).search is True


def test_the_search_alone_is_reported_with_each_database_and_no_streams():
    report = _search_report()
    text = markdown(report)
    assert "| setup |" not in text and "| target |" not in text
    assert "| SQLite | rare word (~0.1%): “zeppelin”, “жираф” | 13 | 20.0 | 30.0 | 40.0 |" in text
    assert "| SQLite | the list, no search | 1,000 | 40.0 | 60.0 | 80.0 |" in text
    assert "each kind 20 times" in text
    assert "- SQLite: 10,000 conversations and 200,000 messages of 10 users" in text
    assert "seeded in 11.7 s; 3 of the 3 queries" in text
    assert "- PostgreSQL: failed: not done" in text
    printed = render(report, [])
    assert "rare word (~0.1%): “zeppelin”, “жираф”" in printed and "targets:" not in printed
