"""Pure helpers of the benchmark: percentiles and the no-loss check of one stream (tested in tests/bench)."""

from __future__ import annotations

import itertools
import math
import re
from collections import Counter
from dataclasses import dataclass

TOKEN = re.compile(r"^([A-Za-z0-9_-]+)\.(\d+)$")


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
