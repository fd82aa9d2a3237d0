"""POST /api/agent/chat: the shell's one-turn contract."""

from __future__ import annotations

import json

import pytest
from asgiref.sync import sync_to_async
from channels.testing import HttpCommunicator
from django.contrib.auth.models import Permission
from rest_framework_simplejwt.tokens import AccessToken

from agentchat.asgi import application
from conversations.services import MAX_CONTEXT_DEPTH
from tests.fake_provider import Reply
from tools.dashboards import demo, permissions
from tools.registry import ToolArgs, ToolContext, ToolRegistry

pytestmark = pytest.mark.django_db

URL = "/api/agent/chat"
HELLO = {"messages": [{"role": "user", "content": "Hello"}]}


class TranscribeArgs(ToolArgs):
    assetId: str


@pytest.fixture
def tools(monkeypatch):
    registry = ToolRegistry()

    @registry.tool
    def transcribe_video(args: TranscribeArgs, ctx: ToolContext) -> str:
        """Transcribe the audio track of a video asset."""
        raise AssertionError("the endpoint never runs a tool")

    @registry.tool(permission="conversations.delete_conversation", requires_confirmation=True)
    def purge_conversations(args: TranscribeArgs, ctx: ToolContext) -> str:
        """Delete conversations for good."""
        raise AssertionError("the endpoint never runs a tool")

    monkeypatch.setattr("conversations.api.views.registry", registry)
    return registry


# MAX_CONTEXT_DEPTH + 1 objects, one inside the other.
TOO_DEEP = json.loads('{"focus": ' * MAX_CONTEXT_DEPTH + "{}" + "}" * MAX_CONTEXT_DEPTH)


def post(client, body):
    # As a client's JSON encoder writes it (ASCII, with \u escapes): a lone surrogate travels only escaped.
    return client.post(URL, json.dumps(body), content_type="application/json")


def test_answer_without_tool_calls(alice_api, llm):
    llm.script(Reply(text="Hello!"))
    response = post(alice_api, HELLO)
    assert response.status_code == 200
    assert response.json() == {"content": "Hello!", "toolCalls": []}
    assert llm.requests[0].body["stream"] is False


def test_tool_calls_come_back_and_nothing_runs(alice_api, llm, tools):
    llm.script(Reply(tool_calls=[("transcribe_video", {"assetId": "a-1"}, "call_1")]))
    response = post(alice_api, {"messages": [{"role": "user", "content": "Transcribe a-1"}]})
    assert response.status_code == 200
    assert response.json() == {
        "content": "",
        "toolCalls": [{"id": "call_1", "name": "transcribe_video", "args": {"assetId": "a-1"}}],
    }


def test_only_the_users_permitted_tools_are_offered(alice_api, alice, llm, tools):
    post(alice_api, HELLO)
    assert [tool["function"]["name"] for tool in llm.requests[-1].tools] == ["transcribe_video"]
    schema = llm.requests[-1].tools[0]["function"]
    assert schema["description"] == "Transcribe the audio track of a video asset."
    assert schema["parameters"]["required"] == ["assetId"]

    alice.user_permissions.add(Permission.objects.get(codename="delete_conversation"))
    post(alice_api, HELLO)
    assert {tool["function"]["name"] for tool in llm.requests[-1].tools} == {
        "transcribe_video",
        "purge_conversations",
    }


def test_system_prompt_carries_the_page_context_and_history_follows(alice_api, llm):
    body = {
        "messages": [
            {"role": "user", "content": "Show dashboard 42"},
            {
                "role": "assistant",
                "content": "",
                "toolCalls": [{"id": "call_1", "name": "transcribe_video", "args": {"assetId": "42"}}],
            },
            {"role": "tool", "content": '{"text": "hi"}', "toolCallId": "call_1", "name": "transcribe_video"},
            {"role": "user", "content": "deploy it"},
        ],
        "context": {"focus": {"type": "dashboard", "id": 42}},
    }
    assert post(alice_api, body).status_code == 200
    messages = llm.requests[0].messages
    assert messages[0]["role"] == "system" and "dashboard 42" in messages[0]["content"]
    assert [m["role"] for m in messages[1:]] == ["user", "assistant", "tool", "user"]
    assert messages[2]["tool_calls"][0]["function"] == {"name": "transcribe_video", "arguments": '{"assetId": "42"}'}
    assert messages[3]["tool_call_id"] == "call_1"


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({}, "messages"),
        ({"messages": []}, "messages"),
        ({"messages": "hello"}, "messages"),
        ({"messages": [{"role": "robot", "content": "x"}]}, "role"),
        ({"messages": [{"role": "user"}]}, "content"),
        ({"messages": [{"role": "tool", "content": "x"}]}, "toolCallId"),
        (
            {"messages": [{"role": "user", "content": "x", "toolCalls": [{"id": "1", "name": "t", "args": {}}]}]},
            "toolCalls",
        ),
        ({"messages": [{"role": "user", "content": "x"}], "context": "page"}, "context"),
        ({"messages": [{"role": "user", "content": "x"}], "context": {"focus": "a\x00b"}}, "NUL"),
        ({"messages": [{"role": "user", "content": "x"}], "context": {"\ud800": 1}}, "surrogate"),
        ({"messages": [{"role": "user", "content": "x"}], "context": TOO_DEEP}, "nest"),
    ],
)
def test_invalid_body_is_400_with_a_description(alice_api, llm, body, field):
    response = post(alice_api, body)
    assert response.status_code == 400
    assert response.json()["code"] == "INVALID" and field in response.json()["error"]
    assert llm.requests == []


def test_anonymous_is_401(anon_api, llm):
    assert post(anon_api, HELLO).status_code == 401
    assert llm.requests == []


@pytest.mark.parametrize("status", [401, 500])
def test_provider_failure_is_502_llm_provider_error(alice_api, llm, status):
    llm.script(*[Reply(status=status)] * 2)
    response = post(alice_api, HELLO)
    assert response.status_code == 502
    body = response.json()
    assert body["error"] == "LLM provider error" and body["code"] == "PROVIDER_ERROR"
    assert "sk-test-SECRET-123" not in response.content.decode()


def test_unreachable_provider_is_502(alice_api, settings):
    settings.LLM_PROVIDER = "openai-compatible"
    settings.LLM_MODEL = "fake-model"
    settings.LLM_API_KEY = "sk-test"
    settings.LLM_BASE_URL = "http://127.0.0.1:9/v1"
    response = post(alice_api, HELLO)
    assert response.status_code == 502 and response.json()["error"] == "LLM provider error"


def test_missing_api_key_is_502_with_the_configuration_message(alice_api, settings):
    settings.LLM_PROVIDER = "openai-compatible"
    settings.LLM_MODEL = "fake-model"
    settings.LLM_API_KEY = ""
    response = post(alice_api, HELLO)
    assert response.status_code == 502
    assert response.json() == {
        "error": "LLM provider is not configured: LLM_API_KEY is missing",
        "code": "PROVIDER_ERROR",
    }


def test_unknown_provider_is_502(alice_api, settings):
    settings.LLM_PROVIDER = "telepathy"
    response = post(alice_api, HELLO)
    assert response.status_code == 502
    assert "telepathy" in response.json()["error"] and response.json()["code"] == "PROVIDER_ERROR"


@pytest.mark.django_db(transaction=True)
async def test_requests_served_together_share_the_connection_to_the_provider(alice, llm):
    """The server's event loop keeps one client per provider: a request does not open a connection of its own."""
    token = await sync_to_async(lambda: str(AccessToken.for_user(alice)))()
    body = json.dumps(HELLO).encode()
    headers = [
        (b"host", b"testserver"),
        (b"authorization", f"Bearer {token}".encode()),
        (b"content-type", b"application/json"),
        (b"content-length", str(len(body)).encode()),
    ]
    for _ in range(3):
        llm.script(Reply(text="Hello!"))
        asked = HttpCommunicator(application, "POST", URL, body=body, headers=headers)
        response = await asked.get_response(timeout=10)
        assert (response["status"], json.loads(response["body"])) == (200, {"content": "Hello!", "toolCalls": []})
        await asked.wait(timeout=10)  # the request's end, where Django gives its database connection back
    assert llm.connections_opened == 1


def test_the_demo_model_says_which_tool_the_user_may_not_use(settings, bob, bob_api):
    settings.LLM_PROVIDER = "local"
    bob.user_permissions.set(demo.permission_rows([permissions.VIEW]))

    response = bob_api.post(
        URL, {"messages": [{"role": "user", "content": "Deploy dashboard 9 to staging"}]}, format="json"
    )

    assert response.status_code == 200, response.content
    assert response.json()["toolCalls"] == []
    assert response.json()["content"].startswith("You may not use `deploy_dashboard`: your account")
