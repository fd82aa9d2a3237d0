"""An answer is indexed for search once it ends, not while it streams: every few hundred milliseconds a streaming
answer's text so far is written, and re-indexing it each time (all of it, on SQLite twice: the old text out, the
new in) cost as much as the write itself.

SQLite: the triggers of 0007 again, with the status in their condition, and the FTS5 table filled anew.
PostgreSQL: the GIN index again, with the status in its condition (conversations/search.py queries with the same).
"""

from django.contrib.postgres.indexes import GinIndex
from django.contrib.postgres.search import SearchVector
from django.db import migrations
from django.db.models import Q

INDEX_NAME = "message_search"
TRIGGERS = ("conversations_message_fts_insert", "conversations_message_fts_delete", "conversations_message_fts_update")


def sqlite_statements(streaming_too: bool) -> list[str]:
    def indexed(row: str) -> str:
        condition = f"{row}.role IN ('user', 'assistant') AND NOT {row}.superseded"
        return condition if streaming_too else f"{condition} AND {row}.status != 'streaming'"

    return [
        *(f"DROP TRIGGER IF EXISTS {name}" for name in TRIGGERS),
        "INSERT INTO conversations_message_fts (conversations_message_fts) VALUES ('delete-all')",
        "INSERT INTO conversations_message_fts (rowid, content) "
        f"SELECT id, content FROM conversations_message AS message WHERE {indexed('message')}",
        f"""CREATE TRIGGER conversations_message_fts_insert AFTER INSERT ON conversations_message
        WHEN {indexed("new")} BEGIN
            INSERT INTO conversations_message_fts (rowid, content) VALUES (new.id, new.content);
        END""",
        # An external-content table forgets a row only when told the text it indexed.
        f"""CREATE TRIGGER conversations_message_fts_delete AFTER DELETE ON conversations_message
        WHEN {indexed("old")} BEGIN
            INSERT INTO conversations_message_fts (conversations_message_fts, rowid, content)
            VALUES ('delete', old.id, old.content);
        END""",
        f"""CREATE TRIGGER conversations_message_fts_update AFTER UPDATE OF content, role, superseded, status
        ON conversations_message
        WHEN ({indexed("old")} OR {indexed("new")}) AND (old.content IS NOT new.content OR old.role IS NOT new.role
            OR old.superseded IS NOT new.superseded OR old.status IS NOT new.status) BEGIN
            INSERT INTO conversations_message_fts (conversations_message_fts, rowid, content)
            SELECT 'delete', old.id, old.content WHERE {indexed("old")};
            INSERT INTO conversations_message_fts (rowid, content)
            SELECT new.id, new.content WHERE {indexed("new")};
        END""",
    ]


def index(streaming_too: bool) -> GinIndex:
    condition = Q(role__in=["user", "assistant"], superseded=False)
    return GinIndex(
        SearchVector("content", config="simple"),
        name=INDEX_NAME,
        condition=condition if streaming_too else condition & ~Q(status="streaming"),
    )


def apply(apps, schema_editor, *, streaming_too: bool) -> None:
    if schema_editor.connection.vendor == "sqlite":
        for statement in sqlite_statements(streaming_too):
            schema_editor.execute(statement)
    elif schema_editor.connection.vendor == "postgresql":
        message = apps.get_model("conversations", "Message")
        schema_editor.remove_index(message, index(not streaming_too))
        schema_editor.add_index(message, index(streaming_too))


def forward(apps, schema_editor) -> None:
    apply(apps, schema_editor, streaming_too=False)


def backward(apps, schema_editor) -> None:
    apply(apps, schema_editor, streaming_too=True)


class Migration(migrations.Migration):
    dependencies = [
        ("conversations", "0011_conversation_is_draft"),
    ]

    operations = [migrations.RunPython(forward, backward, elidable=False)]
