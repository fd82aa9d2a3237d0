"""GET /api/agent/tools: the tools the signed-in user may use, MCP tools among them, with where each comes from."""

from __future__ import annotations

import pytest
import yaml

from tests.conftest import bearer_client
from tests.tools.dashboards.conftest import grant
from tools.registry import registry

from .conftest import PERMISSION

URL = "/api/agent/tools"
pytestmark = pytest.mark.django_db


@pytest.fixture
def with_items(items, monkeypatch):
    """The global registry's tools plus the test server's (which need PERMISSION)."""
    combined = type(registry)()
    for tool in [*registry.all(), *items.registry.all()]:
        combined.register(tool)
    monkeypatch.setattr("tools.api.registry", combined)
    return combined


def by_name(response) -> dict[str, dict]:
    assert response.status_code == 200, response.content
    return {tool["name"]: tool for tool in response.json()}


def test_alice_is_offered_the_mcp_tools_and_bob_is_not(with_items, alice, bob):
    alice = grant(alice, PERMISSION)
    alice_tools = by_name(bearer_client(alice).get(URL))
    bob_tools = by_name(bearer_client(bob).get(URL))

    assert alice_tools["items__delete_item"] == {
        "name": "items__delete_item",
        "description": "(from MCP server 'items') Delete an item for good.",
        "requires_confirmation": True,
        "parameters": {
            "type": "object",
            "properties": {"id": {"title": "Id", "type": "integer"}},
            "required": ["id"],
            "additionalProperties": False,
        },
        "source": {"kind": "mcp", "name": "items"},
    }
    assert alice_tools["items__find_items"]["requires_confirmation"] is False
    assert not [name for name in bob_tools if name.startswith("items__")]
    # The same filter the agent uses: what the user is offered in a run.
    assert set(alice_tools) == {tool.name for tool in with_items.permitted(alice)}
    assert set(bob_tools) == {tool.name for tool in with_items.permitted(bob)}


def test_built_in_tools_name_their_app(with_items, bob):
    tools = by_name(bearer_client(grant(bob, "dashboards.view_dashboard")).get(URL))
    assert tools["search_dashboards"]["source"] == {"kind": "builtin", "name": "dashboards"}
    assert tools["search_dashboards"]["parameters"]["type"] == "object"


def test_session_sign_in_works_too(with_items, client, alice):
    client.force_login(grant(alice, PERMISSION))
    assert "items__find_items" in by_name(client.get(URL))


def test_anonymous_callers_get_the_one_error_shape(anon_api):
    response = anon_api.get(URL)
    assert response.status_code == 401
    assert response.json()["code"] == "AUTH_REQUIRED" and response.json()["error"]


def test_the_endpoint_is_in_the_openapi_schema(client):
    schema = yaml.safe_load(client.get("/api/schema/").content)
    responses = schema["paths"]["/api/agent/tools"]["get"]["responses"]
    assert responses["200"]["content"]["application/json"]["schema"]["type"] == "array"
    assert "401" in responses
