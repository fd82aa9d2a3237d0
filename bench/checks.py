"""Pure helpers of the benchmark: percentiles, the no-loss check of one stream, what passes, the capacity search
(tested in tests/bench)."""

from __future__ import annotations

import itertools
import math
import re
from collections import Counter
from dataclasses import dataclass

TOKEN = re.compile(r"^([A-Za-z0-9_-]+)\.(\d+)$")
# Fewer samples than this make a 99th percentile little more than the slowest one: it is not reported.
MIN_P99_SAMPLES = 100
# Capacity: the most concurrent streams whose added time to first token stays within this at p50 and p99, intact.
CAPACITY_ADDED_MS = 250.0
# Below this many streams a probe needs more rounds than the search's time allows.
CAPACITY_FLOOR = 10


def percentile(values: list[float], q: float) -> float | None:
    """The q-th percentile (0..100), interpolated between the closest ranks; None for no values."""
    if not values:
        return None
    ordered = sorted(values)
    position = (len(ordered) - 1) * q / 100
    low, high = math.floor(position), math.ceil(position)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


@dataclass
class Integrity:
    """What one stream got against what was scripted: tokens lost, duplicated, out of order, foreign."""

    expected: int
    received: int
    lost: int = 0
    duplicated: int = 0
    reordered: int = 0
    foreign: int = 0
    seq_problems: int = 0

    @property
    def ok(self) -> bool:
        return not (self.lost or self.duplicated or self.reordered or self.foreign or self.seq_problems)


def check_stream(text: str, tag: str, count: int, seqs: list[int] | None = None) -> Integrity:
    """Compare the concatenated deltas with the scripted tokens `tag.0 … tag.<count-1>`, and the frames' seqs.

    Tokens are counted from the text, not from the frames, so a server that merges deltas is judged
    the same. `seqs` are the seq numbers of the run's frames in the order they arrived: they must go
    up by one each time (a gap is a lost frame, a repeat or a step back a duplicated or reordered one).
    """
    indexes: list[int] = []
    foreign = 0
    for piece in text.split():
        found = TOKEN.match(piece)
        if found is None or found.group(1) != tag or int(found.group(2)) >= count:
            foreign += 1
        else:
            indexes.append(int(found.group(2)))
    seen = Counter(indexes)
    duplicated = sum(times - 1 for times in seen.values())
    lost = count - len(seen)
    # Out of order: tokens that arrive after a later one (duplicates aside).
    reordered, highest, first_time = 0, -1, set()
    for index in indexes:
        if index in first_time:
            continue
        first_time.add(index)
        if index < highest:
            reordered += 1
        highest = max(highest, index)
    seq_problems = 0
    if seqs:
        seq_problems = sum(1 for before, after in itertools.pairwise(seqs) if after != before + 1)
    return Integrity(
        expected=count,
        received=len(indexes),
        lost=lost,
        duplicated=duplicated,
        reordered=reordered,
        foreign=foreign,
        seq_problems=seq_problems,
    )


def intact(summary: dict) -> bool:
    """Every run of a level completed, each with every token once and in order."""
    return summary["streams_with_integrity_problems"] == 0 and summary["completed"] == summary["runs"]


def within_capacity(level: dict) -> bool:
    """A level (or a capacity probe) the server carried: added TTFT p50 and p99 within the bound, every run intact.

    The added p99 is AgentChat's p99 less the direct client's. When the machine stalls during a direct round, the
    direct tail outgrows AgentChat's and the added p99 falls below the added median, even below zero: the median
    is held to the bound too, so that such a round does not pass on its p99 alone."""
    added = [level["added_ttft_p50_ms"], level["added_ttft_p99_ms"]]
    return None not in added and max(added) <= CAPACITY_ADDED_MS and intact(level["agentchat"])


def bracket(results: dict[int, bool]) -> tuple[int, int | None]:
    """The most streams that passed below the fewest that failed (0 when none), and that fewest (None when none)."""
    failed = min((streams for streams, ok in results.items() if not ok), default=None)
    passed = max((streams for streams, ok in results.items() if ok and (failed is None or streams < failed)), default=0)
    return passed, failed


def next_probe(passed: int, failed: int | None, *, start: int, most: int, floor: int = CAPACITY_FLOOR) -> int | None:
    """The number of streams to try next: doubling until one fails, then halving the gap; None once it is
    within about 10%, or at the bounds (`most` passed, `floor` failed)."""
    if failed is None:
        streams = min(most, passed * 2 if passed else start)
    elif failed <= passed * 1.1 + 1:
        return None
    else:
        streams = max(floor, (passed + failed) // 2)
    return streams if passed < streams and (failed is None or streams < failed) else None
