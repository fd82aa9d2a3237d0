"""The server side of the benchmark, run as its own processes (never imported by the product).

    python -m bench.server prepare            # migrate the bench database, create the bench user
    python -m bench.server serve <daphne args>  # the server, counting the database writes it makes

Both read the usual settings from the environment (DATABASE_URL, REDIS_URL, SECRET_KEY, LLM_*), plus:

- BENCH_USER, BENCH_PASSWORD: the user `prepare` creates (or resets);
- BENCH_COUNTS_FILE: where `serve` writes its count of database writes and the garbage collector's passes so far
  when it gets SIGUSR1;
- BENCH_MEDIA_ROOT: where `serve` keeps uploaded files (the front-door measures' uploads), instead of
  var/media, so that they go with the bench's work directory.

The counts are bench-only and live here: `serve` wraps Django's CursorWrapper.execute/executemany in
this process before daphne starts, and counts each INSERT, UPDATE, DELETE or REPLACE statement sent
to the database, by table, and each such part of a WITH statement as one; and it times each pass of
the garbage collector (`gc.callbacks`), as its generation and milliseconds. Nothing of it exists in a
server started any other way.
"""

from __future__ import annotations

import collections
import functools
import gc
import json
import os
import re
import runpy
import signal
import sys
import threading
import time
from pathlib import Path

WRITE = re.compile(r'^\s*(INSERT\s+INTO|UPDATE|DELETE\s+FROM|REPLACE\s+INTO)\s+"?([A-Za-z0-9_.]+)"?', re.IGNORECASE)
# A WITH statement's parts that change rows (PostgreSQL's data-modifying CTEs), each a write, as it would be on
# its own; not a SELECT's FOR UPDATE.
WITH = re.compile(r"^\s*WITH\b", re.IGNORECASE)
WRITE_PART = re.compile(r'(?<!FOR )\b(INSERT\s+INTO|UPDATE|DELETE\s+FROM)\s+"?([A-Za-z0-9_.]+)"?', re.IGNORECASE)


@functools.lru_cache(maxsize=4096)
def writes(sql: str) -> tuple[str, ...]:
    """The writes a statement makes, as "KIND table". Worked out once per statement: the server builds most of its
    statements once, and matching a long WITH statement each time would cost its trip tens of microseconds."""
    found = WRITE_PART.finditer(sql) if WITH.match(sql) else [WRITE.match(sql)]
    return tuple(f"{write.group(1).split()[0].upper()} {write.group(2)}" for write in found if write)


class WriteCounter:
    """Statements that change rows, by kind and table; thread-safe (the database runs in worker threads)."""

    def __init__(self) -> None:
        self.counts: collections.Counter[str] = collections.Counter()
        self.lock = threading.Lock()

    def see(self, sql) -> None:
        for write in writes(sql if isinstance(sql, str) else str(sql)):
            with self.lock:
                self.counts[write] += 1

    def snapshot(self) -> dict[str, int]:
        # Copying a dict is one step under the GIL: no lock, so a signal handler may call this.
        return dict(self.counts)


class CollectorWatch:
    """The garbage collector's passes in this process, in order: [generation, milliseconds] each."""

    def __init__(self) -> None:
        self.passes: list[list[float]] = []
        self._started = 0.0
        gc.callbacks.append(self._seen)

    def _seen(self, phase: str, info: dict) -> None:
        if phase == "start":
            self._started = time.perf_counter()
        else:
            self.passes.append([info["generation"], (time.perf_counter() - self._started) * 1000])


def install_counts(path: Path) -> WriteCounter:
    from django.db.backends import utils

    counter = WriteCounter()
    watch = CollectorWatch()
    execute, executemany = utils.CursorWrapper.execute, utils.CursorWrapper.executemany

    def counted_execute(self, sql, params=None):
        counter.see(sql)
        return execute(self, sql, params)

    def counted_executemany(self, sql, param_list):
        counter.see(sql)
        return executemany(self, sql, param_list)

    utils.CursorWrapper.execute = counted_execute
    utils.CursorWrapper.executemany = counted_executemany

    def dump() -> None:
        counts = counter.snapshot()
        draft = path.with_name(path.name + ".tmp")
        report = {"pid": os.getpid(), "total": sum(counts.values()), "by_statement": counts}
        draft.write_text(json.dumps({**report, "collections": list(watch.passes)}))
        draft.replace(path)

    signal.signal(signal.SIGUSR1, lambda signum, frame: dump())
    return counter


def prepare() -> None:
    import django

    django.setup()
    from django.contrib.auth import get_user_model
    from django.core.management import call_command

    call_command("migrate", interactive=False, verbosity=0)
    user, _ = get_user_model().objects.get_or_create(username=os.environ["BENCH_USER"])
    user.set_password(os.environ["BENCH_PASSWORD"])
    user.is_active = True
    user.save()


def serve(daphne_args: list[str]) -> None:
    import django

    django.setup()
    if os.environ.get("BENCH_COUNTS_FILE"):
        install_counts(Path(os.environ["BENCH_COUNTS_FILE"]))
    if os.environ.get("BENCH_MEDIA_ROOT"):
        from django.conf import settings

        settings.MEDIA_ROOT = os.environ["BENCH_MEDIA_ROOT"]  # before the file storage first reads it
    # The product's own server entry point, run by name: the benchmarks import none of its code.
    sys.argv = ["agentchat.server", *daphne_args]
    runpy.run_module("agentchat.server", run_name="__main__", alter_sys=True)


def main() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "agentchat.settings")
    command, args = (sys.argv[1], sys.argv[2:]) if len(sys.argv) > 1 else ("", [])
    if command == "prepare":
        prepare()
    elif command == "serve":
        serve(args)
    else:
        sys.exit("usage: python -m bench.server prepare | serve <daphne args>")


if __name__ == "__main__":
    main()
