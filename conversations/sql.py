"""Statements written in SQL, over the models' own tables and columns, for the few reads and writes on every run's
way in: building a query costs Django's ORM several times what the database takes to run it (docs/benchmarks.md).
The rest of the code keeps to the ORM."""

from __future__ import annotations

import functools
import re

from django.apps import apps
from django.db import connection

NAME = re.compile(r"\{(?P<model>\w+)(?:\.(?P<field>\w+))?\}")


@functools.cache
def statement(template: str) -> str:
    """`template` on one line, with `{Model}` as that model's table (of this app) and `{Model.field}` as its column,
    quoted for the database."""

    def name(match: re.Match) -> str:
        meta = apps.get_model("conversations", match["model"])._meta
        return connection.ops.quote_name(meta.get_field(match["field"]).column if match["field"] else meta.db_table)

    return NAME.sub(name, " ".join(template.split()))


def param(model, field: str, value):
    """`value` as the database takes it for `model.field` (a UUID as text on SQLite, a time in UTC…)."""
    return model._meta.get_field(field).get_db_prep_value(value, connection)
