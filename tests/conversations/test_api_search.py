"""Searching the conversation list by title and by the words of the messages, on SQLite and on PostgreSQL."""

from __future__ import annotations

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from conversations import services
from conversations.models import Conversation, Message

pytestmark = pytest.mark.django_db

LIST = "/api/assistant/conversations/"


def say(conversation: Conversation, content: str, role: str = "user", **fields) -> Message:
    message, _ = services.message_append(conversation=conversation, role=role, content=content, **fields)
    return message


def found(api, search: str, **params) -> dict[str, dict | None]:
    """Title → match of each conversation found."""
    response = api.get(LIST, {"search": search, **params})
    assert response.status_code == 200, response.content
    return {item["title"]: item["match"] for item in response.json()["results"]}


def marked(match: dict) -> list[str]:
    return [match["text"][start:end] for start, end in match["highlights"]]


def test_a_title_match_has_no_snippet_and_the_plain_list_keeps_its_shape(alice_api, alice):
    conversation = services.conversation_create(owner=alice, title="Quarterly report")
    say(conversation, "numbers, please")

    assert found(alice_api, "REPORT") == {"Quarterly report": None}
    listed = alice_api.get(LIST).json()["results"][0]
    shown = alice_api.get(f"{LIST}{conversation.pk}/").json()
    assert "match" not in shown and set(listed) == {*shown, "match"} and listed["match"] is None


def test_a_message_match_brings_a_snippet_with_the_words_marked(alice_api, alice):
    conversation = services.conversation_create(owner=alice, title="Sales")
    say(conversation, "How did the northern region do?")
    say(conversation, "The northern region sold 1,200 units, the best Figures of the year.", role="assistant")

    match = found(alice_api, "figures")["Sales"]
    assert "the best Figures" in match["text"]
    assert marked(match) == ["Figures"]

    both = found(alice_api, "northern figures")["Sales"]
    assert marked(both) == ["northern", "Figures"]


def test_every_word_must_be_in_one_message(alice_api, alice):
    conversation = services.conversation_create(owner=alice, title="Split")
    say(conversation, "apples here")
    say(conversation, "pears there", role="assistant")

    assert found(alice_api, "apples pears") == {}
    assert set(found(alice_api, "apples")) == {"Split"}


def test_the_snippet_is_a_few_words_of_the_newest_matching_message(alice_api, alice):
    conversation = services.conversation_create(owner=alice, title="Long")
    say(conversation, "the first mention of the harbour")
    filler = " ".join(f"word{index}" for index in range(200))
    say(conversation, f"{filler} the harbour again {filler}", role="assistant")

    match = found(alice_api, "harbour")["Long"]
    assert marked(match) == ["harbour"]
    assert "again" in match["text"] and "first mention" not in match["text"]
    assert len(match["text"]) < 200


def test_russian_words_are_found_whatever_their_case(alice_api, alice):
    conversation = services.conversation_create(owner=alice, title="Продажи")
    say(conversation, "Отчёт о продажах за март готов: «ёлочки» на месте.", role="assistant")

    for search in ("отчёт", "ОТЧЁТ", "продажах МАРТ"):
        match = found(alice_api, search)["Продажи"]
        assert match["text"].startswith("Отчёт о продажах") and marked(match)
    assert marked(found(alice_api, "отчёт")["Продажи"]) == ["Отчёт"]
    assert found(alice_api, "отчёта") == {}


def test_accented_words_are_found_with_their_accents(alice_api, alice):
    conversation = services.conversation_create(owner=alice, title="Menu")
    say(conversation, "A CAFÉ near the station")

    assert marked(found(alice_api, "café")["Menu"]) == ["CAFÉ"]


def test_only_the_owners_messages_are_searched(alice_api, bob_api, alice, bob):
    mine = services.conversation_create(owner=alice, title="Mine")
    say(mine, "the zeppelin timetable")
    theirs = services.conversation_create(owner=bob, title="Theirs")
    say(theirs, "bob's zeppelin secret", actor=bob)
    only_bob = services.conversation_create(owner=bob, title="Bob only")
    say(only_bob, "a secret of bob's", actor=bob)

    assert set(found(alice_api, "zeppelin")) == {"Mine"}
    assert found(alice_api, "secret") == {}
    assert set(found(bob_api, "zeppelin")) == {"Theirs"}


def test_the_archive_filter_works_with_search(alice_api, alice):
    active = services.conversation_create(owner=alice, title="Active")
    say(active, "lighthouse keeper")
    archived = services.conversation_create(owner=alice, title="Archived")
    say(archived, "lighthouse keeper")
    services.conversation_archive(conversation=archived, actor=alice)

    assert set(found(alice_api, "lighthouse")) == {"Active"}
    assert set(found(alice_api, "lighthouse", archived="true")) == {"Archived"}


def test_results_are_paginated_newest_first(alice_api, alice):
    for index in range(25):
        say(services.conversation_create(owner=alice, title=f"conversation {index}"), "a common word")
    say(Conversation.objects.get(title="conversation 3"), "more of the common word")
    services.conversation_create(owner=alice, title="unrelated")

    first = alice_api.get(LIST, {"search": "common"}).json()
    assert first["count"] == 25 and len(first["results"]) == 20
    assert first["results"][0]["title"] == "conversation 3"
    assert first["results"][0]["match"]["text"] == "more of the common word"
    assert [item["title"] for item in first["results"][1:3]] == ["conversation 24", "conversation 23"]
    second = alice_api.get(LIST, {"search": "common", "page": 2}).json()
    assert len(second["results"]) == 5 and all(item["match"] for item in second["results"])


def test_tool_results_and_superseded_messages_are_not_searched(alice_api, alice):
    conversation = services.conversation_create(owner=alice, title="Tools")
    say(conversation, "", role="assistant", tool_calls=[{"id": "c1", "name": "lookup", "args": {"q": "walrus"}}])
    say(conversation, '{"rows": ["walrus"]}', role="tool", tool_call_id="c1", tool_name="lookup")
    question = say(conversation, "tell me about the narwhal")
    assert set(found(alice_api, "narwhal")) == {"Tools"}
    assert found(alice_api, "walrus") == {}

    Message.objects.filter(pk=question.pk).update(superseded=True)
    assert found(alice_api, "narwhal") == {}
    Message.objects.filter(pk=question.pk).update(superseded=False)
    assert set(found(alice_api, "narwhal")) == {"Tools"}


def test_the_index_follows_edits_and_deletions(alice_api, alice):
    conversation = services.conversation_create(owner=alice, title="Edits")
    message = say(conversation, "the original wording")

    Message.objects.filter(pk=message.pk).update(content="a corrected wording")
    assert found(alice_api, "original") == {}
    assert marked(found(alice_api, "corrected")["Edits"]) == ["corrected"]

    message.refresh_from_db()
    message.content = "streamed text"
    message.save()
    assert found(alice_api, "corrected") == {}
    assert set(found(alice_api, "streamed")) == {"Edits"}
    message.status = Message.Status.COMPLETE
    message.save()  # the same text saved again
    assert set(found(alice_api, "streamed")) == {"Edits"}

    message.delete()
    assert found(alice_api, "streamed") == {}
    say(conversation, "streamed again")
    conversation.delete()
    assert found(alice_api, "streamed") == {}


@pytest.mark.parametrize("ended", [Message.Status.COMPLETE, Message.Status.INTERRUPTED, Message.Status.FAILED])
def test_an_answer_is_searched_once_it_ends(alice_api, alice, ended):
    conversation = services.conversation_create(owner=alice, title="Answers")
    say(conversation, "what lives by the sea?")
    answer = services.assistant_message_start(conversation=conversation, run_id="r1")
    services.assistant_messages_flush(texts={answer.pk: "the pelican"})
    services.assistant_messages_flush(texts={answer.pk: "the pelican and the puffin"})
    assert found(alice_api, "pelican") == {}

    services.assistant_message_save(message_id=answer.pk, content="the pelican and the puffin.", status=ended)
    assert marked(found(alice_api, "puffin")["Answers"]) == ["puffin"]
    Message.objects.filter(pk=answer.pk).delete()
    assert found(alice_api, "puffin") == {}


HOSTILE = [
    '"',
    '""',
    "'",
    "*",
    "a*",
    "a OR",
    "OR",
    "AND NOT",
    "NEAR(",
    "NEAR(a b, 2)",
    "-x",
    ":",
    "content:secret",
    "^start",
    "(",
    "a) OR (b",
    "{x y}",
    "%",
    "_",
    "\\",
    "🎉",
    "日本語",
    "a & b | !c",
    "x:* <-> y",
    '")' * 100,
]


@pytest.mark.parametrize("search", HOSTILE)
def test_query_syntax_in_a_search_is_taken_as_text(alice_api, alice, search):
    conversation = services.conversation_create(owner=alice, title="Syntax")
    say(conversation, "Tea or coffee: a choice, near the x-ray (content secret) start")

    response = alice_api.get(LIST, {"search": search})
    assert response.status_code == 200, response.content
    assert isinstance(response.json()["results"], list)


def test_operator_words_are_plain_words(alice_api, alice):
    conversation = services.conversation_create(owner=alice, title="Words")
    say(conversation, "Tea or coffee, near the x-ray")
    services.conversation_create(owner=alice, title='Say "hi" (now)')

    for search in ("a OR", "or NEAR(", "-x", "coffee*", "tea:"):
        assert set(found(alice_api, search)) <= {"Words"}
    assert set(found(alice_api, "OR")) == {"Words"}
    assert set(found(alice_api, "NEAR(")) == {"Words"}
    assert set(found(alice_api, "-x")) == {"Words"}
    assert found(alice_api, '"hi"') == {'Say "hi" (now)': None}


def test_a_search_too_long_or_with_a_nul_is_refused_plainly(alice_api, alice):
    services.conversation_create(owner=alice, title="Anything")
    for search in ("x" * 10_000, "a\x00b"):
        response = alice_api.get(LIST, {"search": search})
        assert response.status_code == 400 and response.json()["code"] == "INVALID"
    assert alice_api.get(LIST, {"search": "NEAR(" * 40}).status_code == 200


@pytest.mark.django_db(transaction=True)
def test_messages_stored_before_the_search_existed_are_found(alice_api, alice):
    before, search = ("conversations", "0006_message_superseded_usage"), ("conversations", "0007_message_search")
    executor = MigrationExecutor(connection)
    executor.migrate([before])
    try:
        old = executor.loader.project_state([before]).apps
        conversation = old.get_model("conversations", "Conversation").objects.create(owner_id=alice.pk, title="Old")
        stored = old.get_model("conversations", "Message").objects
        stored.create(conversation=conversation, role="user", content="an old albatross")
        streaming = stored.create(
            conversation=conversation, role="assistant", content="a cormorant", status="streaming"
        )
        executor = MigrationExecutor(connection)
        executor.migrate([search])
    finally:
        executor = MigrationExecutor(connection)
        executor.migrate(executor.loader.graph.leaf_nodes())
    assert marked(found(alice_api, "albatross")["Old"]) == ["albatross"]
    assert found(alice_api, "cormorant") == {}
    Message.objects.filter(pk=streaming.pk).update(status=Message.Status.INTERRUPTED)
    assert set(found(alice_api, "cormorant")) == {"Old"}
