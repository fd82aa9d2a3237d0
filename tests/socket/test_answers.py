"""Working with answers over the real socket: regenerate, edit and resend, continue. What is replaced is kept,
marked superseded, and never reaches the model again."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from django.core.files.uploadedfile import SimpleUploadedFile

from agentchat.agent.context import TRUNCATION_LIMIT
from conversations import runs, services
from conversations.models import AuditEvent, Message, PendingConfirmation
from tests.fake_provider import Reply
from tools.registry import ToolArgs, ToolRegistry

from .conftest import needs_postgres_and_redis
from .helpers import of, one, text_of, well_formed
from .test_runs import settle

pytestmark = pytest.mark.django_db(transaction=True)


class DeployArgs(ToolArgs):
    dashboard_id: int


@pytest.fixture
def deployed(monkeypatch) -> list[int]:
    """A dangerous tool, and the ids it really deployed."""
    registry = ToolRegistry()
    done: list[int] = []

    @registry.tool(requires_confirmation=True)
    def deploy_dashboard(args: DeployArgs, ctx) -> dict:
        """Deploy a dashboard."""
        done.append(args.dashboard_id)
        return {"deployed": args.dashboard_id}

    @registry.tool
    def lookup_dashboard(args: DeployArgs, ctx) -> dict:
        """Look a dashboard up."""
        return {"id": args.dashboard_id, "name": "Sales"}

    monkeypatch.setattr(runs.manager, "registry", registry)
    return done


async def turn(socket, frame: dict[str, Any], until: str = "run_finished") -> list[dict[str, Any]]:
    await socket.send(frame)
    return await socket.receive_until(until)


async def ask(socket, content: str, client_id: str | None = None) -> list[dict[str, Any]]:
    return await turn(socket, {"type": "message", "content": content, "client_id": client_id or content[:60]})


async def error(socket, frame: dict[str, Any]) -> dict[str, Any]:
    await socket.send(frame)
    received = await socket.receive()
    assert received["type"] == "error", received
    return received


@sync_to_async
def rows(conversation) -> list[tuple[str, str, bool]]:
    return [
        (message.role, message.content, message.superseded)
        for message in Message.objects.filter(conversation=conversation).order_by("created_at", "id")
    ]


@sync_to_async
def audited(conversation, kind: str) -> list[dict]:
    return list(AuditEvent.objects.filter(conversation=conversation, kind=kind).values_list("data", flat=True))


def sent(request) -> list[dict[str, Any]]:
    """What the model was sent, without the system prompt."""
    return request.messages[1:]


# --- regenerate --------------------------------------------------------------------------------------


async def test_regenerate_keeps_the_old_answer_superseded_and_answers_the_same_question(
    llm, sockets, conversation, alice
):
    llm.script(Reply(text="Paris, I think."), Reply(text="The capital of France is Paris."))
    socket = await sockets(conversation, alice)
    first = await ask(socket, "Capital of France?")
    question = one(first, "message", client_id="Capital of France?")["message"]["id"]
    old = of(first, "message")[-1]["message"]
    other_tab = await sockets(conversation, alice)
    assert old["superseded"] is False

    frames = await turn(socket, {"type": "regenerate", "client_id": "regen-1"})

    replaced = of(frames, "message")[0]["message"]
    assert (replaced["id"], replaced["superseded"], replaced["content"]) == (old["id"], True, "Paris, I think.")
    assert replaced["metadata"]["replaced"] == {"after": question, "branch": old["id"]}
    started = one(frames, "run_started")
    assert started["client_id"] == "regen-1"
    assert text_of(frames) == "The capital of France is Paris." and frames[-1]["status"] == "completed"
    answer = of(frames, "message")[-1]["message"]
    assert (answer["id"], answer["client_id"], answer["superseded"]) == (started["message_id"], "regen-1", False)
    assert sent(llm.requests[1]) == [{"role": "user", "content": "Capital of France?"}]
    # The other tab saw the same: the old answer marked, the new one streamed.
    seen = await other_tab.receive_until("run_finished")
    assert of(seen, "message", message=replaced) and text_of(seen) == "The capital of France is Paris."
    await settle()
    assert await rows(conversation) == [
        ("user", "Capital of France?", False),
        ("assistant", "Paris, I think.", True),
        ("assistant", "The capital of France is Paris.", False),
    ]
    assert await audited(conversation, AuditEvent.Kind.ANSWER_REGENERATED) == [
        {"message_id": question, "replaced": [old["id"]]}
    ]

    # The next question's history has the live branch only.
    llm.script(Reply(text="About 2 million."))
    await ask(socket, "Its population?")
    assert sent(llm.requests[2]) == [
        {"role": "user", "content": "Capital of France?"},
        {"role": "assistant", "content": "The capital of France is Paris."},
        {"role": "user", "content": "Its population?"},
    ]


async def test_a_repeated_regenerate_is_echoed_and_starts_nothing(llm, sockets, conversation, alice):
    llm.script(Reply(text="One."), Reply(text="Two."))
    socket = await sockets(conversation, alice)
    await ask(socket, "Count")
    frames = await turn(socket, {"type": "regenerate", "client_id": "once"})
    await settle()

    await socket.send({"type": "regenerate", "client_id": "once"})
    echo = await socket.receive()

    assert echo["type"] == "message" and echo["client_id"] == "once"
    assert echo["message"]["id"] == one(frames, "run_started")["message_id"] and echo["message"]["content"] == "Two."
    assert await socket.quiet()
    assert len(llm.requests) == 2


async def test_regenerate_calls_a_dangerous_tool_only_after_a_new_approval(llm, sockets, conversation, alice, deployed):
    llm.script(
        Reply(tool_calls=[("deploy_dashboard", {"dashboard_id": 7}, "call_1")]),
        Reply(text="Deployed."),
        Reply(tool_calls=[("deploy_dashboard", {"dashboard_id": 7}, "call_2")]),
    )
    socket = await sockets(conversation, alice)
    first = one(await ask(socket, "Deploy 7"), "confirm_required")
    await turn(socket, {"type": "confirm", "confirmation_id": first["confirmation_id"], "decision": "approve"})
    assert deployed == [7]

    frames = await turn(socket, {"type": "regenerate", "client_id": "again"})

    assert frames[-1]["status"] == "awaiting_confirmation"
    second = one(frames, "confirm_required")
    assert second["confirmation_id"] != first["confirmation_id"] and second["tool_call_id"] == "call_2"
    assert deployed == [7]  # nothing ran again without its owner
    superseded = [frame["message"] for frame in of(frames, "message") if frame["message"]["superseded"]]
    assert [(m["role"], m.get("tool_call_id")) for m in superseded] == [
        ("assistant", ""),
        ("tool", "call_1"),
        ("assistant", ""),
    ]
    assert sent(llm.requests[2]) == [{"role": "user", "content": "Deploy 7"}]

    # Regenerating while a decision is awaited lets that decision lapse, as a new message would.
    llm.script(Reply(text="I will not deploy after all."))
    frames = await turn(socket, {"type": "regenerate", "client_id": "third"})
    assert frames[-1]["status"] == "completed" and deployed == [7]
    status = await sync_to_async(lambda: PendingConfirmation.objects.get(pk=second["confirmation_id"]).status)()
    assert status == PendingConfirmation.Status.SUPERSEDED
    well_formed(sent(llm.requests[3]))
    assert sent(llm.requests[3]) == [{"role": "user", "content": "Deploy 7"}]


async def test_regenerate_with_nothing_to_regenerate_is_invalid(llm, sockets, conversation, alice):
    socket = await sockets(conversation, alice)

    refused = await error(socket, {"type": "regenerate", "client_id": "r"})

    assert refused == {"type": "error", "code": "INVALID", "message": "There is no answer to regenerate yet."}
    assert await rows(conversation) == [] and not llm.requests


async def test_regenerate_while_an_answer_streams_is_busy(llm, sockets, conversation, alice):
    llm.script(Reply(text="word " * 100, interval=0.05))
    socket = await sockets(conversation, alice)
    await socket.send({"type": "message", "content": "Talk", "client_id": "t"})
    await socket.receive_until("token")

    refused = await error(socket, {"type": "regenerate", "client_id": "r"})

    assert refused["code"] == "BUSY"
    await socket.send({"type": "cancel"})
    await socket.receive_until("run_finished")


async def test_an_archived_conversation_cannot_be_regenerated_edited_or_continued(llm, sockets, conversation, alice):
    llm.script(Reply(text="Hi."))
    socket = await sockets(conversation, alice)
    frames = await ask(socket, "Hello")
    question = one(frames, "message", client_id="Hello")["message"]["id"]
    await sync_to_async(services.conversation_archive)(conversation=conversation, actor=alice)

    for frame in (
        {"type": "regenerate"},
        {"type": "continue"},
        {"type": "edit", "message_id": question, "content": "Hello again"},
    ):
        refused = await error(socket, frame)
        assert refused["code"] == "INVALID" and "archived" in refused["message"]
    assert len(await rows(conversation)) == 2


# --- edit and resend ---------------------------------------------------------------------------------


async def test_an_edit_supersedes_the_message_and_everything_after_it(llm, sockets, conversation, alice):
    llm.script(Reply(text="A one."), Reply(text="A two."), Reply(text="A one, edited."))
    socket = await sockets(conversation, alice)
    first = one(await ask(socket, "Q one"), "message", client_id="Q one")["message"]
    await ask(socket, "Q two")

    frames = await turn(
        socket, {"type": "edit", "message_id": first["id"], "content": "Q one, better", "client_id": "e1"}
    )

    superseded = [frame["message"] for frame in of(frames, "message") if frame["message"]["superseded"]]
    assert [message["content"] for message in superseded] == ["Q one", "A one.", "Q two", "A two."]
    # One earlier version, from the start of the conversation, which the page shows above the new question.
    mark = {"after": None, "branch": first["id"]}
    assert [message["metadata"]["replaced"] for message in superseded] == [mark] * 4
    echo = one(frames, "message", client_id="e1")["message"]
    assert (echo["role"], echo["content"], echo["superseded"]) == ("user", "Q one, better", False)
    assert frames[-1]["status"] == "completed" and text_of(frames) == "A one, edited."
    assert sent(llm.requests[2]) == [{"role": "user", "content": "Q one, better"}]
    await settle()
    assert [row for row in await rows(conversation) if not row[2]] == [
        ("user", "Q one, better", False),
        ("assistant", "A one, edited.", False),
    ]
    [edited] = await audited(conversation, AuditEvent.Kind.MESSAGE_EDITED)
    assert edited == {"message_id": echo["id"], "replaces": first["id"]}

    # The same edit again is echoed, not applied twice.
    await socket.send({"type": "edit", "message_id": first["id"], "content": "Q one, better", "client_id": "e1"})
    again = await socket.receive()
    assert again["type"] == "message" and again["message"]["id"] == echo["id"]
    assert await socket.quiet() and len(llm.requests) == 3


async def test_bad_edits_get_the_errors_a_message_would(llm, sockets, conversation, alice, bob):
    llm.script(Reply(text="Hi."))
    socket = await sockets(conversation, alice)
    frames = await ask(socket, "Hello")
    question = one(frames, "message", client_id="Hello")["message"]["id"]
    answer = frames[-1]["message_id"]
    bobs = await sync_to_async(services.conversation_create)(owner=bob)
    bobs_message, _ = await sync_to_async(services.message_append)(conversation=bobs, role="user", content="Bob's")

    cases = [
        (
            {"message_id": bobs_message.pk, "content": "mine now"},
            "NOT_FOUND",
            "There is no such message in this conversation.",
        ),
        ({"message_id": answer, "content": "x"}, "INVALID", "Only your own messages can be edited."),
        ({"message_id": question, "content": "   "}, "INVALID", "The message is empty."),
        ({"message_id": question, "content": 5}, "INVALID", '"content" must be a string.'),
        ({"message_id": "1", "content": "x"}, "INVALID", '"message_id" must be the id of one of your messages.'),
        ({"message_id": True, "content": "x"}, "INVALID", '"message_id" must be the id of one of your messages.'),
        ({"content": "x"}, "INVALID", '"message_id" must be the id of one of your messages.'),
    ]
    for fields, code, message in cases:
        assert await error(socket, {"type": "edit", **fields}) == {"type": "error", "code": code, "message": message}
    assert len(await rows(conversation)) == 2 and len(llm.requests) == 1

    llm.script(Reply(text="Better."))
    await turn(socket, {"type": "edit", "message_id": question, "content": "Hello!"})
    refused = await error(socket, {"type": "edit", "message_id": question, "content": "Hello?"})
    assert refused == {
        "type": "error",
        "code": "INVALID",
        "message": "This message has been replaced already. Edit its newer version.",
    }


async def test_an_oversized_edit_is_cut_and_said_so_like_a_message(llm, sockets, conversation, alice):
    llm.script(Reply(text="Hi."), Reply(text="Long."))
    socket = await sockets(conversation, alice)
    question = one(await ask(socket, "Hello"), "message", client_id="Hello")["message"]["id"]

    frames = await turn(socket, {"type": "edit", "message_id": question, "content": "x" * (TRUNCATION_LIMIT + 5_000)})

    assert one(frames, "notice")["code"] == "MESSAGE_TRUNCATED"
    assert frames[-1]["status"] == "completed"
    edited = [frame["message"] for frame in of(frames, "message") if frame["message"]["role"] == "user"][-1]
    assert len(edited["content"]) < TRUNCATION_LIMIT + 5_000 and not edited["superseded"]


async def test_an_edit_keeps_the_files_of_the_message_it_replaces(llm, sockets, conversation, alice):
    upload = SimpleUploadedFile("notes.csv", b"name,score\nada,3\n", content_type="text/csv")
    attachment = await sync_to_async(services.attachment_upload)(conversation=conversation, owner=alice, upload=upload)
    llm.script(Reply(text="Read it."), Reply(text="Read it again."))
    socket = await sockets(conversation, alice)
    await socket.send(
        {"type": "message", "content": "Read this", "client_id": "f", "attachments": [str(attachment.pk)]}
    )
    frames = await socket.receive_until("run_finished")
    question = one(frames, "message", client_id="f")["message"]["id"]

    frames = await turn(
        socket, {"type": "edit", "message_id": question, "content": "Read this, please", "client_id": "g"}
    )

    assert one(frames, "message", client_id="g")["message"]["attachments"] == [str(attachment.pk)]
    assert "notes.csv" in sent(llm.requests[1])[-1]["content"]


# --- continue ----------------------------------------------------------------------------------------


async def test_continue_after_a_stop_resumes_from_the_stored_history(llm, sockets, conversation, alice):
    llm.script(Reply(text="word " * 200, interval=0.05), Reply(text="And that is the end."))
    socket = await sockets(conversation, alice)
    await socket.send({"type": "message", "content": "Tell a story", "client_id": "s"})
    await socket.receive_until("token")
    await socket.send({"type": "cancel"})
    stopped = await socket.receive_until("run_finished")
    partial = of(stopped, "message")[-1]["message"]
    assert (partial["status"], partial["error"]) == ("interrupted", "You pressed Stop.")

    frames = await turn(socket, {"type": "continue", "client_id": "c"})

    assert one(frames, "run_started")["client_id"] == "c"
    assert frames[-1]["status"] == "completed" and text_of(frames) == "And that is the end."
    assert sent(llm.requests[1]) == [
        {"role": "user", "content": "Tell a story"},
        {"role": "assistant", "content": partial["content"]},
    ]
    [continued] = await audited(conversation, AuditEvent.Kind.RUN_CONTINUED)
    assert continued == {"after": partial["id"]}


async def test_continue_after_the_step_limit_gets_a_fresh_budget(llm, sockets, conversation, alice, deployed, settings):
    settings.AGENT_MAX_ROUNDS = 2
    llm.script(
        *[Reply(tool_calls=[("lookup_dashboard", {"dashboard_id": n}, f"call_{n}")]) for n in (1, 2)],
        Reply(tool_calls=[("lookup_dashboard", {"dashboard_id": 3}, "call_3")]),
        Reply(text="Dashboards 1 to 3 are called Sales."),
    )
    socket = await sockets(conversation, alice)
    frames = await ask(socket, "Look up 1, 2 and 3")
    assert frames[-1]["status"] == "iteration_limit"
    limit = of(frames, "message")[-1]["message"]
    assert (limit["status"], limit["error"]) == ("interrupted", "The agent used all of its 2 steps before finishing.")

    frames = await turn(socket, {"type": "continue"})

    assert frames[-1]["status"] == "completed" and len(of(frames, "tool_end")) == 1
    assert text_of(frames) == "Dashboards 1 to 3 are called Sales."
    history = sent(llm.requests[2])
    well_formed(history)
    assert [m["role"] for m in history] == ["user", "assistant", "tool", "assistant", "tool", "assistant"]


async def test_continue_after_a_failure_answers_the_question(llm, sockets, conversation, alice):
    llm.script(Reply(status=400), Reply(text="Here it is."))
    socket = await sockets(conversation, alice)
    failed = await ask(socket, "Help")
    assert failed[-1]["status"] == "failed"

    frames = await turn(socket, {"type": "continue", "client_id": "k"})

    assert frames[-1]["status"] == "completed" and text_of(frames) == "Here it is."
    assert sent(llm.requests[1]) == [{"role": "user", "content": "Help"}]


async def test_continue_refuses_a_finished_answer_and_a_pending_decision(llm, sockets, conversation, alice, deployed):
    llm.script(Reply(text="Done."), Reply(tool_calls=[("deploy_dashboard", {"dashboard_id": 7}, "call_d")]))
    socket = await sockets(conversation, alice)
    refused = await error(socket, {"type": "continue"})
    assert refused["message"] == "There is nothing to continue yet."
    await ask(socket, "Hi")

    refused = await error(socket, {"type": "continue"})
    assert refused == {
        "type": "error",
        "code": "INVALID",
        "message": "The last answer is complete. Send a new message, or regenerate the answer.",
    }
    await ask(socket, "Deploy 7")
    refused = await error(socket, {"type": "continue", "client_id": "c"})
    assert refused["message"] == "A tool call is waiting for your decision. Approve or reject it first."
    assert len(llm.requests) == 2


# --- a second process -------------------------------------------------------------------------------


@needs_postgres_and_redis
async def test_a_regenerate_on_one_process_reaches_a_socket_on_another(
    daphnes, remote_sockets, fake_llm, conversation, alice
):
    fake_llm.script(Reply(text="First try."), Reply(text="Second try."))
    a, b = await asyncio.to_thread(daphnes, 2)
    on_a = await remote_sockets(a, conversation, alice)
    on_b = await remote_sockets(b, conversation, alice)
    await on_a.send({"type": "message", "content": "Try", "client_id": "t"})
    first = await on_a.receive_until("run_finished", timeout=15)
    await on_b.receive_until("run_finished", timeout=15)

    await on_a.send({"type": "regenerate", "client_id": "r"})
    frames_b = await on_b.receive_until("run_finished", timeout=15)

    replaced = of(frames_b, "message")[0]["message"]
    assert replaced["id"] == first[-1]["message_id"] and replaced["superseded"] is True
    assert text_of(frames_b) == "Second try." and one(frames_b, "run_started")["client_id"] == "r"
    assert fake_llm.requests[1].messages[1:] == [{"role": "user", "content": "Try"}]
