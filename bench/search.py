"""Search at scale: how long `GET /api/assistant/conversations/?search=…` takes over 200,000 messages.

The driver (`measure_search`) runs, for SQLite and for PostgreSQL when it answers, a process of its own on a
throwaway database (a file in the work directory; a database `agentchat_bench_<pid>_search`, dropped
afterwards):

    python -m bench.search [--conversations N …]     # JSON on stdout, progress on stderr

That process migrates the database, seeds it (10,000 conversations of 20 messages each, spread over 10 users; the
searching user owns 1,000 of them, so 20,000 messages), then asks the API for the first page of its
conversations through Django's test client with a JWT, as a client would: each kind of search 20 times after
one warm-up, timed around the request. It also asks the database to explain the queries one search made, and
says whether they read the search index. Like the rest of the bench it imports none of the product's code: the
models are looked up by name, the API by its URL.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import secrets
import shutil
import subprocess
import sys
import time
from typing import Any

from .checks import percentile
from .stack import BASE_DIR, LOOPBACK_POSTGRES, answers, log, throwaway_postgres

SEARCH_TIMEOUT = 300.0
USERNAME = "bench-search"
PASSWORD = "bench-search-password"  # noqa: S105 - a throwaway database's user
# Planted words, each in this share of the messages (user, assistant and tool alike), so that the hits are known.
PLANTED = {"invoice": 0.10, "deadline": 0.05, "отчёт": 0.05, "zeppelin": 0.001, "жираф": 0.001}
# What is searched for, by kind: each kind's searches cycle through its words.
KINDS = {
    "common word (~10% of messages)": ["invoice"],
    "common Russian word (~5%)": ["отчёт"],
    "two common words": ["invoice deadline"],
    "rare word (~0.1%)": ["zeppelin", "жираф"],
    "no match": ["qwertyuiop"],
}
TOOL_SHARE = 0.15  # of the answers, a tool result (JSON) instead
SUPERSEDED_SHARE = 0.02


# --- the driver's side -----------------------------------------------------------------------------


def measure_search(args: argparse.Namespace) -> dict[str, Any]:
    """The figures on each database: SQLite, then PostgreSQL when it is among the setups and answers."""
    result: dict[str, Any] = {"databases": []}
    work_dir = BASE_DIR / "var" / f"bench-{os.getpid()}-search"
    work_dir.mkdir(parents=True, exist_ok=True)
    try:
        if "sqlite" in args.setups:
            url = f"sqlite:///{work_dir / 'search.sqlite3'}"
            result["databases"].append(_run("SQLite", url, args))
        postgres = _postgres_url() if "scaled" in args.setups else None
        if postgres:
            try:
                url, drop = throwaway_postgres(postgres, suffix="_search")
            except Exception as exc:  # psycopg's errors: the server went away, or refuses this user
                result["databases"].append({"database": "PostgreSQL", "error": repr(exc)[:500]})
            else:
                try:
                    result["databases"].append(_run("PostgreSQL", url, args))
                finally:
                    drop()
        elif "scaled" in args.setups:
            log("search: PostgreSQL does not answer on 127.0.0.1:5432 and DATABASE_URL is not set: SQLite only")
    finally:
        if not args.keep:
            shutil.rmtree(work_dir, ignore_errors=True)
    return result


def _postgres_url() -> str | None:
    url = os.environ.get("DATABASE_URL", "")
    if url.startswith(("postgres://", "postgresql://")):
        return url
    return LOOPBACK_POSTGRES if answers(5432) else None


def _run(name: str, url: str, args: argparse.Namespace) -> dict[str, Any]:
    log(f"search: {name}: migrating, seeding {args.search_conversations:,} conversations, then searching")
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "agentchat.settings",
        "DATABASE_URL": url,
        "SECRET_KEY": secrets.token_urlsafe(50),
        "PYTHONUNBUFFERED": "1",
    }
    env.pop("REDIS_URL", None)
    command = [sys.executable, "-m", "bench.search", "--conversations", str(args.search_conversations)]
    command += ["--owned", str(max(1, args.search_conversations // 10)), "--repeat", str(args.search_repeat)]
    started = time.monotonic()
    try:
        done = subprocess.run(  # noqa: S603 - our own interpreter and arguments
            command, cwd=BASE_DIR, env=env, capture_output=True, text=True, timeout=SEARCH_TIMEOUT
        )
    except subprocess.TimeoutExpired:
        return {"database": name, "error": f"not done within {SEARCH_TIMEOUT:g} s"}
    if done.returncode:
        return {"database": name, "error": (done.stderr or done.stdout)[-500:]}
    try:
        figures = json.loads(done.stdout.splitlines()[-1])  # the last line: anything printed before is not ours
    except (ValueError, IndexError):
        return {"database": name, "error": f"no figures in its output: {done.stdout[-300:]!r}"}
    log(f"search: {name}: done in {time.monotonic() - started:.0f} s")
    return {"database": name, **figures}


# --- the process on the throwaway database ---------------------------------------------------------


def words(rng: random.Random, alphabet: str, count: int) -> list[str]:
    """Made-up words of two to four syllables, for filler text that tokenizes like the real thing."""
    consonants, vowels = alphabet.split("|")
    made: set[str] = set()
    while len(made) < count:
        syllables = rng.randint(2, 4)
        made.add("".join(rng.choice(consonants) + rng.choice(vowels) for _ in range(syllables)))
    return sorted(made - set(PLANTED))


def text(rng: random.Random, vocabulary: list[str], low: int, high: int) -> str:
    chosen = rng.choices(vocabulary, k=rng.randint(low, high))
    for word, share in PLANTED.items():
        if rng.random() < share:
            chosen.insert(rng.randrange(len(chosen) + 1), word)
    return " ".join(chosen).capitalize() + "."


def insert_messages(model, rows: list[tuple[Any, str, str, bool]], batch: int = 500) -> None:
    """(conversation, role, content, superseded) rows, `batch` a statement, the other columns at their defaults,
    each prepared once: bulk_create would spend most of the seeding's time preparing 15 values a row."""
    from django.db import connection
    from django.utils import timezone

    given = ("conversation", "role", "content", "superseded")
    fields = [field for field in model._meta.concrete_fields if not field.primary_key]
    now = timezone.now()
    fixed = {
        field.name: field.get_db_prep_save(now if field.name == "created_at" else field.get_default(), connection)
        for field in fields
        if field.name not in given
    }
    conversation_field = model._meta.get_field("conversation")
    keys = {row[0]: conversation_field.get_db_prep_save(row[0].pk, connection) for row in rows}
    columns = ", ".join(connection.ops.quote_name(field.column) for field in fields)
    one = f"({', '.join(['%s'] * len(fields))})"
    values = []
    for conversation, role, content, superseded in rows:
        mine = {"conversation": keys[conversation], "role": role, "content": content, "superseded": superseded}
        values.append([mine[field.name] if field.name in mine else fixed[field.name] for field in fields])
    table = connection.ops.quote_name(model._meta.db_table)
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            with cursor.cursor.copy(f"COPY {table} ({columns}) FROM STDIN") as copy:
                for row in values:
                    copy.write_row(row)
            return
        for first in range(0, len(values), batch):
            chunk = values[first : first + batch]
            cursor.execute(
                f"INSERT INTO {table} ({columns}) VALUES {', '.join([one] * len(chunk))}",  # noqa: S608 - names
                [value for row in chunk for value in row],
            )


def seed(conversations: int, users: int, per_conversation: int, owned: int) -> dict[str, Any]:
    """The users and conversations (bulk_create) and messages (`insert_messages`) in one transaction; the
    searching user owns `owned` conversations."""
    from django.apps import apps
    from django.contrib.auth import get_user_model
    from django.db import transaction

    conversation_model = apps.get_model("conversations", "Conversation")
    message_model = apps.get_model("conversations", "Message")
    user_model = get_user_model()
    rng = random.Random(20261201)  # noqa: S311 - the same data at every run, no secret
    english = words(rng, "bcdfghklmnprstvz|aeiou", 3000)
    russian = words(rng, "бвгдзклмнпрстфх|аеиоуыя", 1500)
    started = time.perf_counter()
    messages = 0
    with transaction.atomic():
        searcher = user_model.objects.create_user(USERNAME, password=PASSWORD)
        others = user_model.objects.bulk_create(
            [user_model(username=f"bench-other-{index}", password="!") for index in range(users - 1)]  # noqa: S106 - unusable
        )
        owners = [searcher] * owned + [others[index % len(others)] for index in range(conversations - owned)]
        for first in range(0, conversations, 1000):
            batch = conversation_model.objects.bulk_create(
                [
                    conversation_model(owner=owner, title=text(rng, english, 2, 6)[:200])
                    for owner in owners[first : first + 1000]
                ]
            )
            rows = []
            for conversation in batch:
                vocabulary = russian if rng.random() < 0.2 else english
                for index in range(per_conversation):
                    role = "user" if index % 2 == 0 else "assistant"
                    content = text(rng, vocabulary, 5, 25) if role == "user" else text(rng, vocabulary, 15, 60)
                    if role == "assistant" and rng.random() < TOOL_SHARE:
                        role, content = "tool", json.dumps({"rows": content.split()[:20]}, ensure_ascii=False)
                    rows.append((conversation, role, content, rng.random() < SUPERSEDED_SHARE))
            insert_messages(message_model, rows)
            messages += len(rows)
    return {
        "users": users,
        "conversations": conversations,
        "messages": messages,
        "searcher_conversations": owned,
        "searcher_messages": owned * per_conversation,
        "seed_s": time.perf_counter() - started,
    }


def explain(captured: list[dict[str, str]]) -> dict[str, Any]:
    """The plans of the queries that read messages, and whether each read the search index."""
    from django.db import connection

    prefix = "EXPLAIN QUERY PLAN " if connection.vendor == "sqlite" else "EXPLAIN "
    marker = "VIRTUAL TABLE INDEX" if connection.vendor == "sqlite" else "message_search"
    plans = []
    with connection.cursor() as cursor:
        for query in captured:
            sql = query["sql"]
            if sql.startswith("SELECT") and "conversations_message" in sql:
                cursor.execute(prefix + sql)
                plans.append("\n".join(" ".join(str(part) for part in row) for row in cursor.fetchall()))
    return {"queries": len(plans), "index_used": sum(marker in plan for plan in plans), "plans": plans}


def time_searches(repeat: int) -> dict[str, Any]:
    from django.db import connection
    from django.test.utils import CaptureQueriesContext
    from rest_framework.test import APIClient

    client = APIClient(HTTP_HOST="127.0.0.1")
    signed_in = client.post("/api/auth/token/", {"username": USERNAME, "password": PASSWORD}, format="json")
    if signed_in.status_code != 200:
        raise RuntimeError(f"signing in: {signed_in.status_code} {signed_in.content[:300]!r}")
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {signed_in.json()['access']}")

    def ask(search: str | None) -> tuple[float, dict[str, Any]]:
        params = {"search": search} if search is not None else {}
        started = time.perf_counter()
        response = client.get("/api/assistant/conversations/", params)
        elapsed = (time.perf_counter() - started) * 1000
        if response.status_code != 200:
            raise RuntimeError(f"search {search!r}: {response.status_code} {response.content[:300]!r}")
        return elapsed, response.json()

    kinds = [("the list, no search", [None]), *KINDS.items()]
    results = []
    for kind, searches in kinds:
        _, body = ask(searches[0])
        times = [ask(searches[index % len(searches)])[0] for index in range(repeat)]
        results.append(
            {
                "kind": kind,
                "searches": [search for search in searches if search is not None],
                "conversations_found": body["count"],
                "with_snippet": sum(item.get("match") is not None for item in body["results"]),
                "samples": len(times),
                "p50_ms": percentile(times, 50),
                "p95_ms": percentile(times, 95),
                "max_ms": max(times),
            }
        )
    with CaptureQueriesContext(connection) as captured:
        ask(KINDS["common word (~10% of messages)"][0])
    return {"searches": results, "explain": explain(captured.captured_queries)}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.search", description=__doc__.split("\n\n")[0])
    parser.add_argument("--conversations", type=int, default=10_000)
    parser.add_argument("--users", type=int, default=10)
    parser.add_argument("--messages-per-conversation", type=int, default=20)
    parser.add_argument("--owned", type=int, default=1_000, help="the searching user's conversations")
    parser.add_argument("--repeat", type=int, default=20, help="timed searches of each kind")
    args = parser.parse_args(argv)

    import django

    django.setup()
    from django.core.management import call_command
    from django.db import connection

    started = time.perf_counter()
    call_command("migrate", interactive=False, verbosity=0)
    migrated = time.perf_counter() - started
    owned = min(args.owned, args.conversations)
    figures = seed(args.conversations, args.users, args.messages_per_conversation, owned)
    if connection.vendor == "postgresql":
        # What autovacuum would have done by the time a table this size is searched.
        with connection.cursor() as cursor:
            cursor.execute("ANALYZE")
    print(json.dumps({"migrate_s": migrated, **figures, **time_searches(args.repeat)}))


if __name__ == "__main__":
    main()
