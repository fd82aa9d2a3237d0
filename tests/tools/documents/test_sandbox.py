"""The child process every file is read in: killed at the time limit, held to the memory and file-size limits,
its errors brought back, and the calling process unharmed."""

from __future__ import annotations

import dataclasses
import time

import pytest

from tools.documents import sandbox
from tools.documents.exceptions import ReadersBusy, Unreadable
from tools.documents.limits import Limits
from tools.documents.parsing import parse_file

from . import samples, targets

MiB = 1024 * 1024
BUDGET = sandbox.Budget(seconds=5, memory_bytes=256 * MiB, file_bytes=8 * MiB)


def test_a_result_comes_back():
    assert sandbox.run(targets.echo, {"a": [1, 2]}, budget=BUDGET) == {"a": [1, 2]}


def test_a_child_past_the_time_limit_is_killed():
    started = time.monotonic()

    with pytest.raises(Unreadable, match=r"longer than 0\.5 seconds"):
        sandbox.run(targets.spin, 30, budget=sandbox.Budget(seconds=0.5, memory_bytes=256 * MiB, file_bytes=MiB))

    assert time.monotonic() - started < 3
    assert sandbox.run(targets.echo, "next", budget=BUDGET) == "next"


def test_memory_past_the_limit_is_refused():
    with pytest.raises(Unreadable, match="more than the 256 MB of memory allowed"):
        sandbox.run(targets.allocate, 1024, budget=BUDGET)

    assert sandbox.run(targets.allocate, 16, budget=BUDGET) == 16 * MiB


def test_writing_past_the_file_limit_is_refused(tmp_path):
    with pytest.raises(Unreadable, match="more content than is kept"):
        sandbox.run(targets.write, str(tmp_path / "out"), 16, budget=BUDGET)


def test_a_document_error_keeps_its_class_and_message():
    with pytest.raises(Unreadable, match=r"Not today\."):
        sandbox.run(targets.refuse, budget=BUDGET)


def test_anything_else_a_parser_raises_is_unreadable():
    with pytest.raises(Unreadable, match=r"could not be read \(RuntimeError: boom\)"):
        sandbox.run(targets.crash, budget=BUDGET)


def test_a_child_that_dies_is_reported():
    with pytest.raises(Unreadable, match="stopped unexpectedly"):
        sandbox.run(targets.die, budget=BUDGET)


def test_when_every_slot_is_taken_the_reader_is_busy(monkeypatch):
    full = sandbox.threading.BoundedSemaphore(1)
    full.acquire()
    monkeypatch.setattr(sandbox, "_slots", full)

    with pytest.raises(ReadersBusy):
        sandbox.run(targets.echo, 1, budget=sandbox.Budget(seconds=0.1, memory_bytes=MiB, file_bytes=MiB))


def test_each_format_is_read_within_its_processor_time(tmp_path):
    source = tmp_path / "big.csv"
    source.write_bytes(samples.large_csv(200_000))
    limits = Limits(cpu_seconds={**Limits().cpu_seconds, "csv": 0.05})

    with pytest.raises(Unreadable, match=r"this CSV file took more than 0\.05 seconds of processor time"):
        sandbox.run(parse_file, str(source), str(tmp_path / "content"), "big.csv", limits, budget=BUDGET)


def test_a_page_of_nested_drawings_is_given_up_after_its_seconds(tmp_path):
    source = tmp_path / "nested.pdf"
    source.write_bytes(samples.nested_xobjects_pdf())
    limits = Limits(pdf_page_seconds=0.5)
    started = time.process_time()

    with pytest.raises(Unreadable, match=r"none of its pages can be read \(it took more than 0\.5 seconds\)"):
        sandbox.run(parse_file, str(source), str(tmp_path / "content"), "nested.pdf", limits, budget=BUDGET)

    assert time.process_time() - started < 1  # this process never read it


def test_a_pdf_past_its_budget_keeps_the_pages_read_in_time(tmp_path):
    lines = [(72, 800 - 12 * row, f"Line {row} of a long report about revenue by region") for row in range(60)]
    source = tmp_path / "long.pdf"
    source.write_bytes(samples.pdf_with_pages([samples.text_ops(lines, size=9)] * 400))
    limits = Limits(cpu_seconds={**Limits().cpu_seconds, "pdf": 1.5})
    # On a loaded machine 1.5 s of processor time can take longer than 5 s of the clock: only the former is tested.
    budget = dataclasses.replace(BUDGET, seconds=60)

    parsed = sandbox.run(parse_file, str(source), str(tmp_path / "content"), "long.pdf", limits, budget=budget)

    assert 0 < parsed.meta["pages_read"] < 400
    assert parsed.meta["pages"] == 400
    assert f"Only the first {parsed.meta['pages_read']} of 400 pages were read" in parsed.text
    assert "longer than the 1.5 seconds allowed" in parsed.text
