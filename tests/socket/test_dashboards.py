"""The dashboard toolset over the real socket, with the real dashboard tools on the global registry.

The fake provider plays the model: it is scripted to call the tools a model would, and each test checks
what the tools really did, what reached the page, and what the provider was sent next.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from asgiref.sync import sync_to_async

from conversations import services
from conversations.models import AuditEvent, Message, PendingConfirmation
from tests.fake_provider import Reply
from tools.dashboards import demo, permissions
from tools.dashboards.models import Branch, Change, Dashboard, Deployment, Migration
from tools.registry import ToolContext, registry

from .helpers import of, one

pytestmark = pytest.mark.django_db(transaction=True)

READING = {"search_dashboards", "dashboard_health"}
CHANGING = {"create_branch", "deploy_dashboard", "execute_migration", "commit_changes"}
DEPLOY_42 = {"dashboard_id": 42, "environment": "production"}


@sync_to_async
def _load(alice, bob) -> None:
    demo.load()
    alice.user_permissions.add(*demo.permission_rows(permissions.ALL))
    bob.user_permissions.set(demo.permission_rows([permissions.VIEW]))


@pytest.fixture
async def catalogue(alice, bob) -> None:
    """The demo catalogue; alice may do everything with it, bob may only look."""
    await _load(alice, bob)


@pytest.fixture
async def bobs_conversation(bob):
    return await sync_to_async(services.conversation_create)(owner=bob)


# --- helpers -------------------------------------------------------------------------------------


def streamed(frames: list[dict[str, Any]]) -> str:
    return "".join(f["delta"] for f in of(frames, "token"))


def offered(request) -> set[str]:
    return {tool["function"]["name"] for tool in request.tools}


def tool_message_sent(request, call_id: str) -> str:
    """The content of the tool message for `call_id` in what the provider was sent."""
    [message] = [m for m in request.messages if m["role"] == "tool" and m.get("tool_call_id") == call_id]
    return message["content"]


def tool_result_sent(request, call_id: str) -> Any:
    return json.loads(tool_message_sent(request, call_id))


async def say(socket, content: str, **extra) -> list[dict[str, Any]]:
    await socket.send({"type": "message", "content": content, **extra})
    return await socket.receive_until("run_finished")


@sync_to_async
def as_tool(name: str, user, **args) -> Any:
    """What the tool itself answers now, as JSON, to compare with what the page got."""
    tool = registry.get(name)
    return json.loads(json.dumps(tool.func(tool.validate(args), ToolContext(user=user))))


@sync_to_async
def rows(model, **filters) -> list:
    return list(model.objects.filter(**filters))


@sync_to_async
def audits(conversation, kind: str) -> list[AuditEvent]:
    return list(AuditEvent.objects.filter(conversation=conversation, kind=kind).order_by("id"))


# --- dashboards with problems: the agent picks the tools ------------------------------------------------------------


async def test_dashboards_with_validation_problems_in_russian(llm, sockets, conversation, alice, catalogue):
    answer = "22 дашборда с проблемами. У №7 ошибка: пропал датасет support.tickets. У №42 только предупреждения."
    llm.script(
        Reply(tool_calls=[("search_dashboards", {"has_validation_problems": True}, "call_search")]),
        Reply(
            tool_calls=[
                ("dashboard_health", {"dashboard_id": 7}, "call_health_7"),
                ("dashboard_health", {"dashboard_id": 42}, "call_health_42"),
            ]
        ),
        Reply(text=answer),
    )
    socket = await sockets(conversation, alice)

    frames = await say(socket, "покажи дашборды с проблемами валидации")

    assert frames[-1]["status"] == "completed", frames
    assert offered(llm.requests[0]) >= READING | CHANGING
    # The page saw each tool start and end with the real data.
    assert [f["tool"] for f in of(frames, "tool_start")] == [
        "search_dashboards",
        "dashboard_health",
        "dashboard_health",
    ]
    found = one(frames, "tool_end", tool_call_id="call_search")["output"]
    with_problems = await sync_to_async(lambda: Dashboard.objects.filter(problems__isnull=False).distinct().count())()
    assert found["total"] == with_problems == 22
    assert found == await as_tool("search_dashboards", alice, has_validation_problems=True)
    assert all(sum(item["problems"].values()) > 0 for item in found["items"])
    health_7 = one(frames, "tool_end", tool_call_id="call_health_7")["output"]
    health_42 = one(frames, "tool_end", tool_call_id="call_health_42")["output"]
    assert health_7["problems"][0]["code"] == "missing_dataset" and health_7["problems"][0]["severity"] == "error"
    assert health_42["title"] == "Воронка продаж по регионам"
    assert health_42 == await as_tool("dashboard_health", alice, dashboard_id=42)
    # Each next request carried the results before it.
    assert tool_result_sent(llm.requests[1], "call_search") == found
    assert tool_result_sent(llm.requests[2], "call_search") == found
    assert tool_result_sent(llm.requests[2], "call_health_7") == health_7
    assert tool_result_sent(llm.requests[2], "call_health_42") == health_42
    assert len(llm.requests) == 3
    # And the answer streamed, and was stored.
    assert streamed(frames) == answer
    [stored] = await rows(Message, pk=frames[-1]["message_id"])
    assert (stored.content, stored.status) == (answer, Message.Status.COMPLETE)


# --- a follow-up: "него" is dashboard 42 --------------------------------------------------------------


async def test_a_branch_for_the_dashboard_shown_before(llm, sockets, conversation, alice, catalogue):
    socket = await sockets(conversation, alice)
    llm.script(
        Reply(tool_calls=[("dashboard_health", {"dashboard_id": 42}, "call_show")]),
        Reply(text="Дашборд 42 — «Воронка продаж по регионам», два предупреждения."),
    )
    first = await say(socket, "покажи дашборд 42")
    assert first[-1]["status"] == "completed"
    assert one(first, "tool_end", tool_call_id="call_show")["output"]["id"] == 42

    llm.script(
        Reply(tool_calls=[("create_branch", {"dashboard_id": 42}, "call_branch")]),
        Reply(text="Создал ветку alice/dashboard-42."),
    )
    second = await say(socket, "создай для него ветку")

    assert second[-1]["status"] == "completed", second
    assert not of(second, "confirm_required")  # a branch is safe: no approval asked
    created = one(second, "tool_end", tool_call_id="call_branch")["output"]
    assert created["dashboard_id"] == 42 and created["branch"] == "alice/dashboard-42"
    [branch] = await rows(Branch, dashboard_id=42, name="alice/dashboard-42")
    assert branch.created_by_id == alice.pk
    # What let the model resolve "него": the first turn, dashboard 42's report included, was in its request.
    asked = llm.requests[2].messages
    assert [m["content"] for m in asked if m["role"] == "user"] == ["покажи дашборд 42", "создай для него ветку"]
    assert tool_result_sent(llm.requests[2], "call_show")["title"] == "Воронка продаж по регионам"


# --- deployment waits for its owner -------------------------------------------------------


async def ask_to_deploy_42(llm, socket) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    llm.script(Reply(text="Разворачиваю дашборд 42.", tool_calls=[("deploy_dashboard", DEPLOY_42, "call_deploy")]))
    frames = await say(socket, "разверни его в прод", context={"focus": {"type": "dashboard", "id": 42}})
    assert frames[-1]["status"] == "awaiting_confirmation", frames
    return one(frames, "confirm_required", tool_call_id="call_deploy"), frames


async def test_deploy_it_resolves_to_the_dashboard_on_the_page(llm, sockets, conversation, alice, catalogue):
    socket = await sockets(conversation, alice)
    confirm, frames = await ask_to_deploy_42(llm, socket)

    system = llm.requests[0].messages[0]
    assert system["role"] == "system" and "dashboard 42" in system["content"]
    assert confirm["tool"] == "deploy_dashboard" and confirm["input"] == DEPLOY_42
    assert not of(frames, "tool_start") and not of(frames, "tool_end")
    assert await rows(Deployment, deployed_by=alice) == []


async def test_an_approved_deployment_runs_once_and_the_run_completes(llm, sockets, conversation, alice, catalogue):
    socket = await sockets(conversation, alice)
    confirm, _ = await ask_to_deploy_42(llm, socket)
    assert await rows(Deployment, dashboard_id=42, deployed_by=alice) == []
    llm.script(Reply(text="Дашборд 42 в проде."))

    await socket.send({"type": "confirm", "confirmation_id": confirm["confirmation_id"], "decision": "approve"})
    frames = await socket.receive_until("run_finished")

    assert frames[-1]["status"] == "completed", frames
    output = one(frames, "tool_end", tool_call_id="call_deploy")["output"]
    [deployment] = await rows(Deployment, dashboard_id=42, deployed_by=alice)
    assert (deployment.pk, deployment.environment, deployment.status) == (
        output["deployment_id"],
        "production",
        "succeeded",
    )
    assert output["deployed_by"] == "alice"
    assert tool_result_sent(llm.requests[-1], "call_deploy") == output
    assert streamed(frames) == "Дашборд 42 в проде."


async def test_a_rejected_deployment_never_happens(llm, sockets, conversation, alice, catalogue):
    socket = await sockets(conversation, alice)
    confirm, _ = await ask_to_deploy_42(llm, socket)
    llm.script(Reply(text="Хорошо, не разворачиваю."))

    await socket.send(
        {"type": "confirm", "confirmation_id": confirm["confirmation_id"], "decision": "reject", "reason": "not today"}
    )
    frames = await socket.receive_until("run_finished")

    assert frames[-1]["status"] == "completed", frames
    refused = one(frames, "tool_error", tool_call_id="call_deploy")
    assert "rejected by the user" in refused["error"] and "not today" in refused["error"]
    assert not of(frames, "tool_start")
    assert await rows(Deployment, deployed_by=alice) == []
    # A second decision changes nothing either.
    await socket.send({"type": "confirm", "confirmation_id": confirm["confirmation_id"], "decision": "approve"})
    assert (await socket.receive())["code"] == "CHECKPOINT_EXPIRED"
    assert await rows(Deployment, deployed_by=alice) == []


async def test_production_refuses_errors_and_the_model_hears_why(llm, sockets, conversation, alice, catalogue):
    socket = await sockets(conversation, alice)
    llm.script(Reply(tool_calls=[("deploy_dashboard", {"dashboard_id": 7, "environment": "prod"}, "call_7")]))
    frames = await say(socket, "Deploy dashboard 7 to prod")
    confirm = one(frames, "confirm_required", tool_call_id="call_7")
    llm.script(Reply(text="Dashboard 7 has an error; fix it first."))

    await socket.send({"type": "confirm", "confirmation_id": confirm["confirmation_id"], "decision": "approve"})
    frames = await socket.receive_until("run_finished")

    error = one(frames, "tool_error", tool_call_id="call_7")["error"]
    assert error.startswith("deploy_dashboard failed: Dashboard 7 was not deployed")
    assert "missing_dataset" in error
    assert await rows(Deployment, deployed_by=alice) == []
    assert tool_message_sent(llm.requests[-1], "call_7") == f"Error: {error}"


@pytest.mark.parametrize(
    ("tool", "args"),
    [
        ("execute_migration", {"dashboard_id": 42}),
        ("commit_changes", {"dashboard_id": 42, "message": "Regional chart"}),
    ],
)
async def test_the_other_dangerous_tools_wait_too(llm, sockets, conversation, alice, catalogue, tool, args):
    socket = await sockets(conversation, alice)
    llm.script(Reply(tool_calls=[(tool, args, "call_dangerous")]))
    frames = await say(socket, f"Please {tool.replace('_', ' ')} for dashboard 42")
    confirm = one(frames, "confirm_required", tool_call_id="call_dangerous")
    assert await rows(Migration, dashboard_id=42, executed_by=alice) == []
    assert len(await rows(Change, dashboard_id=42, branch="main", commit__isnull=True)) == 2

    await socket.send({"type": "confirm", "confirmation_id": confirm["confirmation_id"], "decision": "approve"})
    frames = await socket.receive_until("run_finished")

    assert frames[-1]["status"] == "completed", frames
    one(frames, "tool_end", tool_call_id="call_dangerous")
    if tool == "execute_migration":
        [migration] = await rows(Migration, dashboard_id=42, executed_by=alice)
        assert migration.name == "0003_region_code"
    else:
        assert await rows(Change, dashboard_id=42, branch="main", commit__isnull=True) == []


# --- each user's own tools ---------------------------------------------------------------------------------


async def test_each_user_is_offered_only_their_tools(
    llm, sockets, conversation, bobs_conversation, alice, bob, catalogue
):
    llm.script(Reply(text="Hello, Bob."), Reply(text="Hello, Alice."))
    await say(await sockets(bobs_conversation, bob), "What can you do?")
    await say(await sockets(conversation, alice), "What can you do?")

    bobs, alices = offered(llm.requests[0]), offered(llm.requests[1])
    assert bobs >= READING and not bobs & CHANGING
    assert alices >= READING | CHANGING


@pytest.mark.parametrize(
    ("tool", "args"),
    [
        ("deploy_dashboard", DEPLOY_42),
        ("execute_migration", {"dashboard_id": 42}),
        ("commit_changes", {"dashboard_id": 42}),
        ("create_branch", {"dashboard_id": 42, "name": "bobs-branch"}),
    ],
)
async def test_a_forged_call_is_refused_not_run_and_audited(
    llm, sockets, bobs_conversation, bob, catalogue, tool, args
):
    llm.script(Reply(tool_calls=[(tool, args, "call_forged")]), Reply(text="I may not do that."))
    socket = await sockets(bobs_conversation, bob)

    frames = await say(socket, "Do it anyway")

    assert frames[-1]["status"] == "completed", frames
    refused = one(frames, "tool_error", tool_call_id="call_forged")
    assert refused["tool"] == tool and "permission denied" in refused["error"]
    assert not of(frames, "confirm_required") and not of(frames, "tool_start") and not of(frames, "tool_end")
    assert await rows(PendingConfirmation, conversation=bobs_conversation) == []
    assert await rows(Deployment, deployed_by=bob) == []
    assert await rows(Migration, executed_by=bob) == []
    assert [branch.name for branch in await rows(Branch, dashboard_id=42)] == ["feature/regional-breakdown"]
    assert len(await rows(Change, dashboard_id=42, commit__isnull=True)) == 3
    [denied] = await audits(bobs_conversation, AuditEvent.Kind.PERMISSION_DENIED)
    assert denied.actor_id == bob.pk and denied.data["tool"] == tool
    assert "permission denied" in tool_message_sent(llm.requests[1], "call_forged")


# --- what is approved is exactly what runs ---------------------------------------------------------


async def test_a_mistyped_dashboard_id_is_refused_not_coerced_and_the_model_is_told(
    llm, sockets, conversation, alice, catalogue
):
    llm.script(
        Reply(tool_calls=[("deploy_dashboard", {"dashboard_id": True, "environment": "production"}, "call_bool")]),
        Reply(text="Which dashboard did you mean?"),
    )
    socket = await sockets(conversation, alice)

    frames = await say(socket, "deploy it to production")

    assert not of(frames, "confirm_required") and not of(frames, "tool_start"), frames
    refused = one(frames, "tool_error", tool_call_id="call_bool")
    assert refused["outcome"] == "invalid"
    assert "dashboard_id: expected a whole number, got true" in refused["error"]
    assert tool_message_sent(llm.requests[1], "call_bool") == f"Error: {refused['error']}"
    assert await rows(PendingConfirmation, conversation=conversation) == []
    assert await rows(Deployment, deployed_by=alice) == []
    assert frames[-1]["status"] == "completed"


async def test_an_unknown_search_filter_is_an_error_not_every_dashboard(llm, sockets, conversation, alice, catalogue):
    llm.script(
        Reply(tool_calls=[("search_dashboards", {"has_validation_errors": True}, "call_search")]),
        Reply(text="Let me try that again."),
    )
    socket = await sockets(conversation, alice)

    frames = await say(socket, "dashboards with validation errors")

    assert not of(frames, "tool_end"), frames
    refused = one(frames, "tool_error", tool_call_id="call_search")
    assert refused["outcome"] == "invalid" and "has_validation_errors: unknown argument" in refused["error"]
    assert "has_validation_problems" in refused["error"]  # the model learns the right name


async def test_the_card_the_confirmation_the_audit_and_the_deployment_agree(
    llm, sockets, conversation, alice, catalogue
):
    llm.script(Reply(tool_calls=[("deploy_dashboard", {"dashboard_id": 42, "environment": " Prod "}, "call_deploy")]))
    socket = await sockets(conversation, alice)
    frames = await say(socket, "ship 42 to prod")
    confirm = one(frames, "confirm_required")
    llm.script(Reply(text="Done."))

    await socket.send({"type": "confirm", "confirmation_id": confirm["confirmation_id"], "decision": "approve"})
    frames = await socket.receive_until("run_finished")

    assert confirm["input"] == DEPLOY_42  # " Prod " is shown as what runs: production
    [row] = await rows(PendingConfirmation, pk=confirm["confirmation_id"])
    assert row.args == DEPLOY_42 and row.args_hash == services.args_hash(DEPLOY_42)
    [requested] = await audits(conversation, AuditEvent.Kind.CONFIRMATION_REQUESTED)
    [decided] = await audits(conversation, AuditEvent.Kind.CONFIRMATION_DECIDED)
    called = [event.data["args"] for event in await audits(conversation, AuditEvent.Kind.TOOL_CALLED)]
    assert requested.data["args"] == decided.data["args"] == DEPLOY_42 and called == [DEPLOY_42]
    assert one(frames, "tool_start", tool_call_id="call_deploy")["input"] == DEPLOY_42
    [deployment] = await rows(Deployment, deployed_by=alice)
    assert (deployment.dashboard_id, deployment.environment) == (42, "production")


async def test_edited_arguments_are_held_to_the_same_contract(llm, sockets, conversation, alice, catalogue):
    socket = await sockets(conversation, alice)
    confirm, _ = await ask_to_deploy_42(llm, socket)

    for args, named in [
        ({"dashboard_id": "42", "environment": "staging"}, 'dashboard_id: expected a whole number, got "42"'),
        ({"dashboard_id": 42, "environment": "staging", "force": True}, "force: unknown argument"),
    ]:
        await socket.send(
            {"type": "confirm", "confirmation_id": confirm["confirmation_id"], "decision": "edit", "args": args}
        )
        error = await socket.receive()
        assert error["type"] == "error" and error["code"] == "INVALID" and named in error["message"], error
    [row] = await rows(PendingConfirmation, pk=confirm["confirmation_id"])
    assert row.status == PendingConfirmation.Status.PENDING

    llm.script(Reply(text="On staging."))
    edit = {"dashboard_id": 42, "environment": "stage"}
    await socket.send(
        {"type": "confirm", "confirmation_id": confirm["confirmation_id"], "decision": "edit", "args": edit}
    )
    frames = await socket.receive_until("run_finished")
    normalised = {"dashboard_id": 42, "environment": "staging"}
    assert one(frames, "tool_start", tool_call_id="call_deploy")["input"] == normalised
    [row] = await rows(PendingConfirmation, pk=confirm["confirmation_id"])
    assert row.edited_args == normalised
    [deployment] = await rows(Deployment, deployed_by=alice)
    assert deployment.environment == "staging"


def revoke_quietly(user, codename: str) -> None:
    """A permission taken away in the database without a signal (another service, a script)."""
    user.user_permissions.through.objects.filter(user=user, permission__codename=codename).delete()


async def test_a_permission_revoked_during_a_run_is_checked_at_the_next_call(
    llm, sockets, conversation, alice, catalogue, monkeypatch
):
    """The run has used create_branch once; the permission goes while the model is asked again."""
    llm.script(
        Reply(tool_calls=[("create_branch", {"dashboard_id": 42}, "call_branch_1")]),
        Reply(tool_calls=[("create_branch", {"dashboard_id": 42}, "call_branch_2")]),
        Reply(text="I may not branch it again."),
    )
    record = llm.record

    def revoke_at_the_second_request(request) -> None:
        if len(llm.requests) == 1:
            revoke_quietly(alice, "create_branch")
        record(request)

    monkeypatch.setattr(llm, "record", revoke_at_the_second_request)
    socket = await sockets(conversation, alice)

    frames = await say(socket, "branch dashboard 42, twice")

    assert one(frames, "tool_end", tool_call_id="call_branch_1")
    refused = one(frames, "tool_error", tool_call_id="call_branch_2")
    assert refused["outcome"] == "denied" and "permission denied" in refused["error"]
    assert len(await rows(Branch, dashboard_id=42, created_by=alice)) == 1
    denied = await audits(conversation, AuditEvent.Kind.PERMISSION_DENIED)
    assert [event.data["tool"] for event in denied] == ["create_branch"]
    assert frames[-1]["status"] == "completed"


async def test_the_demo_model_tells_bob_he_may_not_deploy_rather_than_answer_something_else(
    settings, catalogue, bob, bobs_conversation, sockets
):
    settings.LLM_PROVIDER = "local"
    socket = await sockets(bobs_conversation, bob)

    said = {}
    for request in ["Deploy dashboard 9 to staging", "Выкати дашборд 9 на стейджинг"]:
        await socket.send({"type": "message", "content": request})
        frames = await socket.receive_until("run_finished", timeout=60)
        assert not of(frames, "tool_start") and one(frames, "run_finished")["status"] == "completed"
        said[request] = of(frames, "message")[-1]["message"]["content"]

    assert said["Deploy dashboard 9 to staging"].startswith("You may not use `deploy_dashboard`: your account")
    assert said["Выкати дашборд 9 на стейджинг"].startswith("Вам нельзя использовать `deploy_dashboard`")
    assert not await Deployment.objects.filter(dashboard_id=9, environment="staging", deployed_by=bob).aexists()


async def test_on_the_demo_model_them_after_two_checks_is_two_deployments_each_decided_on_its_own(
    settings, catalogue, alice, conversation, sockets
):
    settings.LLM_PROVIDER = "local"
    socket = await sockets(conversation, alice)

    async def ask(request: str) -> list[dict[str, Any]]:
        await socket.send({"type": "message", "content": request})
        return await socket.receive_until("run_finished", timeout=60)  # the model reads on the test's cores

    checked = await ask("How healthy are dashboards 3 and 5?")
    assert [frame["input"] for frame in of(checked, "tool_start")] == [{"dashboard_id": 3}, {"dashboard_id": 5}]
    asked = await ask("Deploy them to staging")
    cards = of(asked, "confirm_required")
    assert [card["input"] for card in cards] == [
        {"dashboard_id": 3, "environment": "staging"},
        {"dashboard_id": 5, "environment": "staging"},
    ]
    assert one(asked, "run_finished")["status"] == "awaiting_confirmation"

    await socket.send({"type": "confirm", "confirmation_id": cards[0]["confirmation_id"], "decision": "approve"})
    approved = await socket.receive_until("run_finished", timeout=60)
    # Carried out at once; the answer waits for the other decision.
    assert one(approved, "tool_end")["output"]["dashboard_id"] == 3
    assert one(approved, "run_finished")["status"] == "awaiting_confirmation"
    await socket.send({"type": "confirm", "confirmation_id": cards[1]["confirmation_id"], "decision": "reject"})
    rejected = await socket.receive_until("run_finished", timeout=60)

    assert one(rejected, "run_finished")["status"] == "completed"
    answer = of(rejected, "message")[-1]["message"]["content"]
    assert answer.startswith("Deployment #") and "of dashboard #3" in answer
    assert 'You rejected `deploy_dashboard(dashboard_id=5, environment="staging")`, so it did not run.' in answer
    assert [deployment.dashboard_id for deployment in await rows(Deployment, deployed_by=alice)] == [3]
