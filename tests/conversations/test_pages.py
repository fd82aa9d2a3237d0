"""The server-rendered pages: the list with its forms, the chat page's history, scoping and safety."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.test import Client
from django.utils import timezone

from conversations import services
from conversations.models import Conversation, Message, PendingConfirmation

pytestmark = pytest.mark.django_db


@pytest.fixture
def alice_client(alice) -> Client:
    client = Client()
    client.force_login(alice)
    return client


def make(owner, title: str, *, archived: bool = False, messages: int = 0) -> Conversation:
    conversation = services.conversation_create(owner=owner, title=title)
    for n in range(messages):
        services.message_append(conversation=conversation, role="user", content=f"message {n}")
    if archived:
        services.conversation_archive(conversation=conversation, actor=owner)
    return conversation


def test_pages_need_a_sign_in(alice):
    conversation = make(alice, "Secret")
    for url in ["/", f"/c/{conversation.pk}/"]:
        response = Client().get(url)
        assert response.status_code == 302
        assert response["Location"].startswith("/accounts/login/?next=")


def test_the_list_newest_first_with_counts_search_and_archive_filter(alice, bob, alice_client):
    revenue = make(alice, "Quarterly revenue", messages=2)
    # Answers, tool results and a question replaced by an edit are not questions asked.
    services.message_append(conversation=revenue, role="assistant", content="Here it is.")
    services.message_append(conversation=revenue, role="tool", content="{}", tool_call_id="c1", tool_name="search")
    replaced, _ = services.message_append(conversation=revenue, role="user", content="Old wording")
    Message.objects.filter(pk=replaced.pk).update(superseded=True)
    make(alice, "Churn analysis", messages=1)
    old = make(alice, "Old plans", archived=True)
    make(bob, "Bob's own")

    page = alice_client.get("/").content.decode()
    assert page.index("Churn analysis") < page.index("Quarterly revenue")
    assert "2 questions" in page and "1 question" in page
    assert "messages" not in page.split('class="conversations"')[1]
    assert "Old plans" not in page and "Bob&#x27;s own" not in page

    found = alice_client.get("/?q=churn").content.decode()
    assert "Churn analysis" in found and "Quarterly revenue" not in found
    assert 'class="found"' not in found  # found by its title, which says so itself

    services.message_append(conversation=revenue, role="assistant", content="Deployed to staging at noon.")
    by_words = alice_client.get("/?q=staging").content.decode()
    assert "Quarterly revenue" in by_words
    assert '<p class="found">Deployed to <mark>staging</mark> at noon' in by_words
    services.message_append(conversation=revenue, role="assistant", content="<script>alert(1)</script> onboarding")
    assert "<script>alert" not in alice_client.get("/?q=onboarding").content.decode()

    archived = alice_client.get("/?archived=1").content.decode()
    assert "Old plans" in archived and "Churn analysis" not in archived
    assert f'action="/c/{old.pk}/restore/"' in archived and f'action="/c/{old.pk}/rename/"' in archived

    nothing = alice_client.get("/?q=zzz").content.decode()
    assert "No conversation has “zzz” in its title or its messages." in nothing


def test_a_new_conversation_begins_with_its_first_message(alice, alice_client):
    page = alice_client.get("/c/new/").content.decode()
    assert 'id="start"' in page and 'name="content"' in page and "What can the agent do for you?" in page
    assert not Conversation.objects.exists()  # looking at the start page makes nothing

    assert alice_client.post("/c/new/", {"content": "   "})["Location"] == "/c/new/"
    assert not Conversation.objects.exists()

    response = alice_client.post("/c/new/", {"content": "Deploy <b>dashboard 3</b>"})
    conversation = Conversation.objects.get(owner=alice)
    assert response["Location"] == f"/c/{conversation.pk}/"
    # The chat page has the message in its box, and sends it once its socket is ready; only the first time.
    chat = alice_client.get(response["Location"]).content.decode()
    assert 'data-send-first="1"' in chat and "Deploy &lt;b&gt;dashboard 3&lt;/b&gt;</textarea>" in chat
    again = alice_client.get(response["Location"]).content.decode()
    assert "data-send-first" not in again and 'aria-describedby="composer-hint"></textarea>' in again


def test_someone_with_no_conversation_lands_on_the_message_box(alice, alice_client):
    page = alice_client.get("/").content.decode()
    assert 'id="start"' in page and "All conversations, search and archive" not in page
    assert "Your conversations" not in page
    make(alice, "Old plans", archived=True)
    page = alice_client.get("/").content.decode()
    assert 'id="start"' in page and "Your conversations" in page
    assert "No active conversations: the ones you archived are under Archived." in page
    assert "All conversations, search and archive" in alice_client.get("/c/new/").content.decode()


def test_the_list_lands_on_the_message_box_above_it_but_not_when_archived_or_searched(alice, alice_client):
    make(alice, "Budget review", messages=1)

    page = alice_client.get("/").content.decode()
    assert page.index('id="start-message"') < page.index("Budget review")
    assert "<h2>Your conversations</h2>" in page and 'href="/c/new/"' not in page
    for query in ("?archived=1", "?q=budget"):
        page = alice_client.get(f"/{query}").content.decode()
        assert 'id="start"' not in page and 'href="/c/new/"' in page, query


def test_archive_says_so_with_undo(alice, alice_client):
    conversation = make(alice, "Budget", messages=1)
    response = alice_client.post(f"/c/{conversation.pk}/archive/", {"next": "/?q=bud"}, follow=True)
    page = response.content.decode()
    assert "“Budget” was archived." in page
    assert f'<form method="post" action="/c/{conversation.pk}/restore/" class="inline">' in page
    assert '<input type="hidden" name="next" value="/?q=bud">' in page and ">Undo</button>" in page
    assert "“Budget” was archived." not in alice_client.get("/").content.decode()  # said once

    page = alice_client.post(f"/c/{conversation.pk}/restore/", {"next": "/?q=bud"}, follow=True).content.decode()
    conversation.refresh_from_db()
    assert not conversation.is_archived and "“Budget” was restored." in page


def test_rename_archive_restore(alice, alice_client):
    conversation = make(alice, "")

    alice_client.post(f"/c/{conversation.pk}/rename/", {"title": "  Budget   2026 "})
    conversation.refresh_from_db()
    assert conversation.title == "Budget 2026"
    response = alice_client.post(f"/c/{conversation.pk}/rename/", {"title": "   "}, follow=True)
    assert "A title cannot be empty." in response.content.decode()

    response = alice_client.post(f"/c/{conversation.pk}/archive/", {"next": "/?q=budget"})
    assert response["Location"] == "/?q=budget"
    conversation.refresh_from_db()
    assert conversation.is_archived

    response = alice_client.post(f"/c/{conversation.pk}/restore/", follow=True)
    conversation.refresh_from_db()
    assert not conversation.is_archived
    assert "“Budget 2026” was restored." in response.content.decode()


def test_forms_go_back_only_to_our_own_pages(alice, alice_client):
    conversation = make(alice, "Mine")
    response = alice_client.post(f"/c/{conversation.pk}/archive/", {"next": "https://evil.example/"})
    assert response["Location"] == "/"


def test_forms_change_nothing_on_get(alice, alice_client):
    conversation = make(alice, "Mine")
    assert alice_client.get(f"/c/{conversation.pk}/archive/").status_code == 405
    assert alice_client.get("/c/new/").status_code == 200
    assert Conversation.objects.count() == 1


def test_someone_elses_conversation_is_not_found(alice, bob, alice_client):
    theirs = make(bob, "Bob's")
    assert alice_client.get(f"/c/{theirs.pk}/").status_code == 404
    for action in ["rename", "archive", "restore"]:
        assert alice_client.post(f"/c/{theirs.pk}/{action}/", {"title": "x"}).status_code == 404
    theirs.refresh_from_db()
    assert (theirs.title, theirs.is_archived) == ("Bob's", False)


def test_the_chat_page_draws_the_history(alice, alice_client):
    conversation = make(alice, "Deploys")
    add = Message.objects.create
    add(conversation=conversation, role="user", content="Deploy <b>Sales</b>\nplease")
    add(
        conversation=conversation,
        role="assistant",
        content="Looking **now**.",
        tool_calls=[
            {"id": "c1", "name": "search_dashboards", "args": {"q": "Sales"}},
            {"id": "c2", "name": "broken_tool", "args": {}},
            {"id": "c3", "name": "deploy_dashboard", "args": {"id": 7}},
            {"id": "c4", "name": "deploy_dashboard", "args": {"id": 8}},
            {"id": "c5", "name": "deploy_dashboard", "args": {"id": 9}},
            {"id": "c6", "name": "search_dashboards", "args": {}},
        ],
    )
    add(
        conversation=conversation,
        role="tool",
        tool_call_id="c1",
        tool_name="search_dashboards",
        content='{"n": 1}',
        outcome="done",
    )
    add(
        conversation=conversation,
        role="tool",
        tool_call_id="c2",
        tool_name="broken_tool",
        content="Error: boom",
        is_error=True,
        outcome="error",
    )
    results = {"c4": "rejected", "c5": "unknown", "c6": "cancelled"}
    for call_id, outcome in results.items():
        # The card follows the stored outcome, whatever the words of the result.
        add(conversation=conversation, role="tool", tool_call_id=call_id, content="Error: x", outcome=outcome)
    PendingConfirmation.objects.create(
        conversation=conversation,
        tool_call_id="c3",
        tool_name="deploy_dashboard",
        args={"id": 7},
        args_hash="x",
        expires_at=timezone.now() + timedelta(hours=1),
    )
    add(conversation=conversation, role="assistant", content="Half an ans", status="interrupted")

    page = alice_client.get(f"/c/{conversation.pk}/").content.decode()
    assert "Deploy &lt;b&gt;Sales&lt;/b&gt;\nplease" in page
    assert "<p>Looking <strong>now</strong>.</p>" in page
    assert 'data-tool-call-id="c1" data-state="ok"' in page
    assert '<code class="tool-name">search_dashboards</code>' in page
    assert "&quot;n&quot;: 1" in page  # the output, indented for reading
    assert 'data-tool-call-id="c2" data-state="error"' in page
    assert 'data-tool-call-id="c3" data-state="waiting"' in page
    assert 'data-tool-call-id="c4" data-state="rejected"' in page
    assert 'data-tool-call-id="c5" data-state="unknown"' in page
    assert "Outcome unknown: check before retrying" in page
    assert 'data-tool-call-id="c6" data-state="cancelled"' in page
    assert "Stopped before the end." in page
    assert f'data-ws-path="/ws/chat/{conversation.pk}/"' in page
    assert f'data-upload-url="/api/assistant/conversations/{conversation.pk}/attachments/"' in page


def test_an_answer_that_failed_without_a_word_shows_where_and_why(alice, alice_client):
    conversation = make(alice, "Failures")
    add = Message.objects.create
    add(conversation=conversation, role="user", content="First")
    failed = add(
        conversation=conversation, role="assistant", status="failed", error="The model provider <b>is down</b>."
    )
    add(conversation=conversation, role="user", content="Second")
    empty = add(conversation=conversation, role="assistant", status="complete")  # nothing to show: not drawn

    page = alice_client.get(f"/c/{conversation.pk}/").content.decode()

    assert f'data-message-id="{failed.pk}" data-status="failed"' in page
    assert f'data-message-id="{empty.pk}"' not in page
    assert "The answer could not be finished." in page
    assert '<span class="msg-error">The model provider &lt;b&gt;is down&lt;/b&gt;.</span>' in page
    assert page.index(">First<") < page.index("could not be finished") < page.index(">Second<")


def test_the_chat_page_shows_the_live_branch_only(alice, alice_client):
    conversation = make(alice, "Redone")
    add = Message.objects.create
    add(conversation=conversation, role="user", content="Which day is it?")
    old = add(conversation=conversation, role="assistant", content="It is Monday, I guess.", superseded=True)
    new = add(conversation=conversation, role="assistant", content="It is Tuesday.")

    page = alice_client.get(f"/c/{conversation.pk}/").content.decode()

    assert f'data-message-id="{new.pk}"' in page and "It is Tuesday." in page
    assert f'data-message-id="{old.pk}"' not in page and "Monday" not in page


def test_the_chat_page_of_an_archived_conversation_is_read_only(alice, alice_client):
    conversation = make(alice, "Old", archived=True)
    page = alice_client.get(f"/c/{conversation.pk}/").content.decode()
    assert "This conversation is archived. Restore it to continue." in page
    assert 'data-archived="1"' in page
    assert '<textarea id="message" name="content" rows="1"' in page and "disabled></textarea>" in page


def test_the_pages_are_in_russian_when_chosen(alice, alice_client):
    conversation = make(alice, "Планы", messages=5)
    response = alice_client.post("/i18n/setlang/", {"language": "ru", "next": "/"})
    assert response["Location"] == "/"
    page = alice_client.get("/").content.decode()
    assert '<html lang="ru">' in page
    assert "Ваши беседы" in page and "5 вопросов" in page and "Выйти" in page
    chat = alice_client.get(f"/c/{conversation.pk}/").content.decode()
    assert "Напишите агенту…" in chat and "Отправить" in chat


def test_no_page_shows_template_syntax(alice, alice_client):
    # A Django comment {# #} ends at its line: one that runs on shows as text on the page.
    conversation = make(alice, "Plans", messages=2)
    archived = make(alice, "Old", archived=True)
    urls = ["/", "/?archived=true", "/c/new/", f"/c/{conversation.pk}/", f"/c/{archived.pk}/"]
    for url in [*urls, "/accounts/login/"]:
        client = alice_client if url != "/accounts/login/" else Client()
        page = client.get(url).content.decode()
        assert not any(mark in page for mark in ("{#", "#}", "{%", "%}")), url


def test_the_script_and_styles_are_served_locally(alice_client):
    page = alice_client.get("/").content.decode()
    assert '<script type="module" src="/static/js/chat.js"></script>' in page
    assert '<script src="/jsi18n/"></script>' in page
    assert "http://" not in page.replace("http://testserver", "") and "https://" not in page


def test_the_chat_page_says_when_the_demo_model_answers(alice, alice_client, settings):
    conversation = make(alice, "Demo")

    settings.LLM_PROVIDER = "local"
    page = alice_client.get(f"/c/{conversation.pk}/").content.decode()
    assert 'id="demo-note"' in page and 'data-demo-model="1"' in page
    assert "This server answers with its small built-in demo model." in page
    assert "<code>LLM_PROVIDER=openai-compatible</code>" in page

    settings.LLM_PROVIDER = "openai-compatible"
    page = alice_client.get(f"/c/{conversation.pk}/").content.decode()
    assert 'id="demo-note"' not in page and 'data-demo-model="0"' in page
