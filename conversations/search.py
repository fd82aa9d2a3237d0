"""Search in a person's conversations: their titles, and the words of their messages.

A conversation matches when its title contains the search as typed, or when one of its searched messages has
every word of it. The user's and the assistant's messages are searched, not superseded ones: tool results are
data for the model (often JSON), and a superseded message is no longer part of the conversation as it reads. An
answer is searched once it ends: indexing its text again at each write while it streams would cost as much as
the write. Each conversation found by its messages brings its newest such message, with a snippet of it.

PostgreSQL searches a GIN index of `to_tsvector('simple', content)`; SQLite an FTS5 table that triggers keep in
step with the messages (both made by migration 0007, their condition as of 0012). Words are compared whole and
without regard to case, in any language: 'simple' neither stems nor drops words, so English and Russian are
alike. What a person types is never read as query syntax.
"""

from __future__ import annotations

import re
from typing import TypedDict

from django.contrib.postgres.search import SearchHeadline, SearchQuery, SearchVector
from django.db import connection
from django.db.models import BooleanField, Exists, F, Func, OuterRef, Prefetch, Q, QuerySet, TextField

from .models import Conversation, Message

SEARCHED = Q(role__in=[Message.Role.USER, Message.Role.ASSISTANT], superseded=False) & ~Q(
    status=Message.Status.STREAMING
)
CONFIG = "simple"
FTS_TABLE = "conversations_message_fts"
SNIPPET_WORDS = 16
WORD = re.compile(r"\w+")
# Where the database marks the words found. Never in the text a person sees: `highlighted` takes them out.
START, STOP = "\x02", "\x03"
MARK = re.compile(f"([{START}{STOP}])")


class Match(TypedDict):
    text: str
    highlights: list[tuple[int, int]]


def conversations_search(user, *, query: str, archived: bool | None = False) -> QuerySet[Conversation]:
    """The user's conversations whose title contains `query` or one of whose searched messages has all its words;
    `archived=None` gives both kinds. `match_of` gives each one's match.

    The snippets are a prefetch: made for the conversations of the page only, after it is cut.
    """
    conversations = Conversation.objects.filter(owner=user)
    if archived is not None:
        conversations = conversations.filter(is_archived=archived)
    words = WORD.findall(query)
    if not words:
        return conversations.filter(title__icontains=query)
    found, newest = _postgresql(words) if connection.vendor == "postgresql" else _sqlite(words)
    newest = newest.only("conversation").order_by("-created_at", "-id")[:1]
    return conversations.filter(Q(title__icontains=query) | Q(found)).prefetch_related(
        Prefetch("messages", queryset=newest, to_attr="matching_messages")
    )


def match_of(conversation: Conversation) -> Match | None:
    """Where a conversation of `conversations_search` matched: None when by its title alone, or without a search."""
    matching = getattr(conversation, "matching_messages", None)
    return highlighted(matching[0].snippet) if matching else None


def pieces(match: Match) -> list[tuple[str, bool]]:
    """A match's text in pieces, each with whether it is a word found: what the list page marks."""
    found, at = [], 0
    for start, end in match["highlights"]:
        found += [(match["text"][at:start], False), (match["text"][start:end], True)]
        at = end
    return [(text, marked) for text, marked in [*found, (match["text"][at:], False)] if text]


def highlighted(snippet: str) -> Match:
    """A snippet as the API gives it: plain text, and the [start, end) of each word found, in characters."""
    text, highlights, start = [], [], None
    length = 0
    for piece in MARK.split(snippet):
        if piece == START:
            start = length
        elif piece == STOP:
            if start is not None and start < length:
                highlights.append((start, length))
            start = None
        else:
            text.append(piece)
            length += len(piece)
    return {"text": "".join(text), "highlights": highlights}


def _postgresql(words: list[str]) -> tuple[Q, QuerySet[Message]]:
    # The expression and the condition of the index, or the planner cannot use it.
    query = SearchQuery(" ".join(words), config=CONFIG, search_type="plain")
    hits = Message.objects.alias(document=SearchVector("content", config=CONFIG)).filter(SEARCHED, document=query)
    snippet = SearchHeadline(
        "content",
        query,
        config=CONFIG,
        start_sel=START,
        stop_sel=STOP,
        max_words=SNIPPET_WORDS,
        min_words=SNIPPET_WORDS // 2,
        max_fragments=1,
    )
    return Q(pk__in=hits.values("conversation_id")), hits.annotate(snippet=snippet)


class _Fts(Func):
    """SQL about one message in FTS5: `sql` with the message's id, the table and the MATCH expression's parameter."""

    sql = ""

    def __init__(self, message_id, *, match: str):
        super().__init__(message_id)
        self.match = match

    def as_sql(self, compiler, connection, **extra):
        message_id, params = compiler.compile(self.source_expressions[0])
        return self.sql.format(message_id=message_id, table=FTS_TABLE, words=SNIPPET_WORDS), (*params, self.match)


class _Indexed(_Fts):
    """Whether a message is among the matches (the triggers index only the searched messages).

    The unary + keeps SQLite from taking the matches as keys to look up in each conversation, one lookup per
    match: it reads the conversation's messages from the index instead, and looks each up among the matches.
    """

    output_field = BooleanField()
    sql = "+{message_id} IN (SELECT rowid FROM {table} WHERE {table} MATCH %s)"


class _Snippet(_Fts):
    """FTS5's snippet() of one message: a function of the full-text table's row, so a query of its own."""

    output_field = TextField()
    sql = (
        "(SELECT snippet({table}, 0, char(2), char(3), '', {words}) FROM {table} "
        "WHERE rowid = {message_id} AND {table} MATCH %s)"
    )


def _sqlite(words: list[str]) -> tuple[Exists, QuerySet[Message]]:
    # Each word a quoted string (a word has no quote in it): FTS5 reads no operator, column or prefix in it.
    match = " ".join(f'"{word}"' for word in words)
    hits = Message.objects.filter(_Indexed(F("pk"), match=match))
    return Exists(hits.filter(conversation=OuterRef("pk"))), hits.annotate(snippet=_Snippet(F("pk"), match=match))
