"""Statements written in SQL, over the models' own tables and columns, for the few reads and writes on every run's
way in and out: building a query costs Django's ORM several times what the database takes to run it
(docs/benchmarks.md). The rest of the code keeps to the ORM."""

from __future__ import annotations

import contextlib
import functools
import re
from collections.abc import Callable

from django.apps import apps
from django.db import DEFAULT_DB_ALIAS, connection, connections
from django.db.models import DEFERRED, QuerySet

NAME = re.compile(r"\{(?P<model>\w+)(?:\.(?P<field>\w+|\*))?\}")
# A column type's length or precision: varchar(16), numeric(10, 2).
TYPE_MODIFIERS = re.compile(r"\(.*\)")


@functools.cache
def statement(template: str) -> str:
    """`template` on one line, with `{Model}` as that model's table (of this app), `{Model.field}` as its column
    and `{Model.*}` as all of its columns, quoted for the database.

    All the columns are named rather than `*`: a statement prepared with `*` fails once a migration adds a column
    to its table ("cached plan must not change result type") until the connection ends."""

    def name(match: re.Match) -> str:
        meta = apps.get_model("conversations", match["model"])._meta
        quote = connection.ops.quote_name
        if match["field"] == "*":
            return ", ".join(f"{quote(meta.db_table)}.{quote(field.column)}" for field in meta.concrete_fields)
        return quote(meta.get_field(match["field"]).column if match["field"] else meta.db_table)

    return NAME.sub(name, " ".join(template.split()))


def current():
    """The default database's connection in this thread (or the one the event loop's trip put in its place), looked
    up once. Each attribute read through `django.db.connection` looks it up again, a few microseconds every time,
    and a field's methods read several: some forty a trip, a tenth of its time."""
    return connections[DEFAULT_DB_ALIAS]


def param(model, field: str, value):
    """`value` as the database takes it for `model.field` (a UUID as text on SQLite, a time in UTC…)."""
    return model._meta.get_field(field).get_db_prep_value(value, current())


# In a query given to `prepared`, the value that stands for the one filled in later.
MARKER = -2_147_000_001


def prepared(build: Callable[[], QuerySet]) -> Callable[[object], tuple[str, list]]:
    """The query `build` makes, compiled to SQL by the ORM once; called with a value, its SQL and parameters with
    that value wherever `build` put MARKER."""

    @functools.cache
    def compiled() -> tuple[str, tuple]:
        return build().query.sql_with_params()

    def filled(value) -> tuple[str, list]:
        sql, params = compiled()
        return sql, [value if item == MARKER else item for item in params]

    return filled


def _new_fields(model) -> tuple:
    return tuple(field for field in model._meta.concrete_fields if not field.primary_key)


def _columns(fields) -> str:
    return ", ".join(connection.ops.quote_name(field.column) for field in fields)


def _values(objs: list, fields, db) -> list:
    """The parameters of new rows: each field's default, pre_save and database form, as bulk_create takes them."""
    return [field.get_db_prep_save(field.pre_save(obj, True), db) for obj in objs for field in fields]


def stored(objs: list, keys) -> None:
    """`objs` as stored under the primary keys `keys`, in order."""
    for obj, pk in zip(objs, keys, strict=True):
        obj.pk = pk
        obj._state.adding, obj._state.db = False, DEFAULT_DB_ALIAS


@functools.cache
def _insert_statement(model, count: int) -> tuple[str, tuple]:
    fields = _new_fields(model)
    row = "(" + ", ".join(["%s"] * len(fields)) + ")"
    sql = f"INSERT INTO {connection.ops.quote_name(model._meta.db_table)} ({_columns(fields)}) "
    sql += f"VALUES {', '.join([row] * count)} RETURNING {connection.ops.quote_name(model._meta.pk.column)}"
    return sql, fields


def insert(objs: list) -> None:
    """`objs`, new instances of one model, stored in one statement and given their primary keys, as bulk_create
    stores them, with the statement built once per model and number of rows: compiling it each time cost the ORM
    more than the database took to run it."""
    sql, fields = _insert_statement(type(objs[0]), len(objs))
    db = current()
    with db.cursor() as cursor:
        cursor.execute(sql, _values(objs, fields, db))
        stored(objs, [pk for (pk,) in cursor.fetchall()])


@functools.cache
def _rows_statement(model, count: int, computed: tuple[tuple[int, str, str], ...]) -> tuple[str, tuple]:
    fields = _new_fields(model)
    cells = []
    for row in range(count):
        cast = []
        for field in fields:
            # Cast to the column's type without its length or precision: a cast to varchar(16) would cut a longer
            # value short, where storing it in the column refuses it.
            cell = f"CAST(%s AS {TYPE_MODIFIERS.sub('', field.cast_db_type(connection))})"
            expressions = [expression for at, name, expression in computed if (at, name) == (row, field.name)]
            cast.append(expressions[0].replace("{}", cell) if expressions else cell)
        cells.append("(" + ", ".join(cast) + ")")
    table = connection.ops.quote_name(model._meta.db_table)
    sql = f"{table} ({_columns(fields)}) SELECT * FROM (VALUES {', '.join(cells)}) AS new"  # noqa: S608 - no values
    return sql, fields


def new_rows(objs: list, computed: tuple[tuple[int, str, str], ...] = ()) -> tuple[str, list]:
    """What follows `INSERT INTO` to store `objs`, new instances of one model, from a SELECT that a WHERE may add
    to, and its parameters (PostgreSQL): `"table" (columns) SELECT * FROM (VALUES …) AS new`. Each value is cast to
    its column's type, which a VALUES list in a FROM clause does not take from the table. In `computed`,
    (row, field, expression): that value is the SQL expression, in which `{}` stands for the value given."""
    sql, fields = _rows_statement(type(objs[0]), len(objs), computed)
    return sql, _values(objs, fields, current())


def rows(model, sql: str, params) -> list:
    """Instances of `model` from `sql`, a SELECT of its table, as `Model.objects.raw` makes them (columns matched to
    fields by name, each value converted by its field, any other column an attribute as it comes), with the
    matching worked out once per model and statement: working it out for every query, or even reading the cursor's
    description (psycopg makes an object for each column every time), cost more than the database took to run
    it."""
    db = current()
    with db.cursor() as cursor:
        cursor.execute(sql, params)
        return _fetched(model, sql, cursor, db)


def _fetched(model, sql: str, cursor, db) -> list:
    found = cursor.fetchall()
    if model is None:
        return found
    make = _MAKERS.get((model, sql))
    if make is None:
        make = _MAKERS[model, sql] = _maker(model, tuple(column[0] for column in cursor.description))
    return [make(row, db) for row in found]


class Reads:
    """Reads sent to the database together: on PostgreSQL in one pipeline, so that a run's start waits for one
    answer of the server for all of them rather than one for each (docs/benchmarks.md); elsewhere one after the
    other. `add` each read, `send()` them, then call what `add` gave for its rows."""

    def __init__(self) -> None:
        self._queued: list[tuple] = []
        self._found: list[list] = []

    def add(self, model, sql: str, params) -> Callable[[], list]:
        """The read's rows once sent: instances of `model`, as rows() makes them, or tuples where it is None."""
        index = len(self._queued)
        self._queued.append((model, sql, params))
        return lambda: self._found[index]

    def send(self) -> None:
        db = current()
        if db.vendor != "postgresql":
            self._found = [rows(model, sql, params) for model, sql, params in self._queued]
            return
        db.ensure_connection()
        with contextlib.ExitStack() as closing:
            cursors = [closing.enter_context(db.cursor()) for _ in self._queued]
            # Leaving the pipeline waits for every answer at once; an error of one read is raised there, as Django's.
            with db.wrap_database_errors, db.connection.pipeline():
                for cursor, (_, sql, params) in zip(cursors, self._queued, strict=True):
                    cursor.execute(sql, params)
            read = zip(self._queued, cursors, strict=True)
            self._found = [_fetched(model, sql, cursor, db) for (model, sql, _), cursor in read]


# How rows() makes instances, by model and statement: a few fixed statements, each with its own columns.
_MAKERS: dict[tuple[type, str], Callable[[tuple, object], object]] = {}


def _maker(model, columns: tuple[str, ...]) -> Callable[[tuple, object], object]:
    position = {column: index for index, column in enumerate(columns)}
    fields = model._meta.concrete_fields
    taken = [position.get(field.column) for field in fields]
    converted = []  # (column's index, its expression, the converters the ORM would apply), in that order
    for field, index in zip(fields, taken, strict=True):
        col = field.get_col(model._meta.db_table)
        converters = [*connection.ops.get_db_converters(col), *col.get_db_converters(connection)]
        if index is not None and converters:
            converted.append((index, col, converters))
    own = {field.column for field in fields}
    extra = [(index, column) for column, index in position.items() if column not in own]
    names = [field.attname for field in fields]

    def make(row: tuple, db):
        values = list(row)
        for index, col, converters in converted:
            for converter in converters:
                values[index] = converter(values[index], col, db)
        instance = model.from_db(DEFAULT_DB_ALIAS, names, [DEFERRED if i is None else values[i] for i in taken])
        for index, column in extra:
            setattr(instance, column, values[index])
        return instance

    return make
