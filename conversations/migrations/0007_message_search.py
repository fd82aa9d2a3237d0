"""Search in message text (conversations/search.py): on SQLite an FTS5 table kept by triggers, on PostgreSQL a GIN
index. Each is made only on its own database; neither is in the models' state.

Only the user's and the assistant's messages that are not superseded are indexed. A later migration that makes
SQLite rebuild conversations_message (most changes of its columns do) drops the triggers with the old table: it
must create them again and fill the FTS5 table anew ('delete-all', then the INSERT below), or the search misses
what is written meanwhile (tests/conversations/test_api_search.py fails until it does).
"""

from django.contrib.postgres.indexes import GinIndex
from django.contrib.postgres.search import SearchVector
from django.db import migrations
from django.db.models import Q

INDEX_NAME = "message_search"

SQLITE_FORWARD = [
    "CREATE VIRTUAL TABLE conversations_message_fts USING fts5("
    "content, content='conversations_message', content_rowid='id', tokenize='unicode61 remove_diacritics 2')",
    "INSERT INTO conversations_message_fts (rowid, content) SELECT id, content FROM conversations_message "
    "WHERE role IN ('user', 'assistant') AND NOT superseded",
    """CREATE TRIGGER conversations_message_fts_insert AFTER INSERT ON conversations_message
    WHEN new.role IN ('user', 'assistant') AND NOT new.superseded BEGIN
        INSERT INTO conversations_message_fts (rowid, content) VALUES (new.id, new.content);
    END""",
    # An external-content table forgets a row only when told the text it indexed.
    """CREATE TRIGGER conversations_message_fts_delete AFTER DELETE ON conversations_message
    WHEN old.role IN ('user', 'assistant') AND NOT old.superseded BEGIN
        INSERT INTO conversations_message_fts (conversations_message_fts, rowid, content)
        VALUES ('delete', old.id, old.content);
    END""",
    """CREATE TRIGGER conversations_message_fts_update AFTER UPDATE OF content, role, superseded
    ON conversations_message
    WHEN old.content IS NOT new.content OR old.role IS NOT new.role OR old.superseded IS NOT new.superseded BEGIN
        INSERT INTO conversations_message_fts (conversations_message_fts, rowid, content)
        SELECT 'delete', old.id, old.content WHERE old.role IN ('user', 'assistant') AND NOT old.superseded;
        INSERT INTO conversations_message_fts (rowid, content)
        SELECT new.id, new.content WHERE new.role IN ('user', 'assistant') AND NOT new.superseded;
    END""",
]
SQLITE_BACKWARD = [
    "DROP TRIGGER conversations_message_fts_update",
    "DROP TRIGGER conversations_message_fts_delete",
    "DROP TRIGGER conversations_message_fts_insert",
    "DROP TABLE conversations_message_fts",
]


def apply(apps, schema_editor, statements: list[str], index_change: str) -> None:
    if schema_editor.connection.vendor == "sqlite":
        for statement in statements:
            schema_editor.execute(statement)
    elif schema_editor.connection.vendor == "postgresql":
        # Built by Django from the expression and condition conversations/search.py queries with, so that they agree.
        index = GinIndex(
            SearchVector("content", config="simple"),
            name=INDEX_NAME,
            condition=Q(role__in=["user", "assistant"], superseded=False),
        )
        getattr(schema_editor, index_change)(apps.get_model("conversations", "Message"), index)


def forward(apps, schema_editor) -> None:
    apply(apps, schema_editor, SQLITE_FORWARD, "add_index")


def backward(apps, schema_editor) -> None:
    apply(apps, schema_editor, SQLITE_BACKWARD, "remove_index")


class Migration(migrations.Migration):
    dependencies = [
        ("conversations", "0006_message_superseded_usage"),
    ]

    operations = [migrations.RunPython(forward, backward, elidable=False)]
