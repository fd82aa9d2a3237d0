"""POST /api/auth/service-token/: the agent's service token, for service accounts only."""

from __future__ import annotations

import time
from datetime import datetime

import jwt
import pytest
import yaml
from asgiref.sync import async_to_sync
from django.apps import apps
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group, Permission

from tests.conftest import bearer_client
from tests.http_service import SECRET, TOKEN_ENV
from tools.registry import ToolContext

pytestmark = pytest.mark.django_db

URL = "/api/auth/service-token/"


@pytest.fixture
def configured(make_services, monkeypatch):
    app = apps.get_app_config("http_tools")
    monkeypatch.setattr(app, "services", make_services())
    return app.services


def issue_permission() -> Permission:
    return Permission.objects.get(content_type__app_label="http_tools", codename="issue_service_token")


@pytest.fixture
def service_account(db):
    account = get_user_model().objects.create_user("agent-svc", password="svc-password")
    account.user_permissions.add(issue_permission())
    return account


def test_a_service_account_gets_a_token_the_service_can_verify(configured, service_account):
    response = bearer_client(service_account).post(URL, {"service": "billing"}, format="json")

    assert response.status_code == 200, response.content
    body = response.json()
    assert body["token_type"] == "Bearer" and body["service"] == "billing"
    claims = jwt.decode(body["token"], SECRET, algorithms=["HS256"], audience="billing", issuer="agentchat")
    assert claims["token_type"] == "service"
    assert claims["service"] == "agent-svc" and claims["sub"] == str(service_account.pk)
    assert abs(claims["exp"] - (time.time() + 30 * 24 * 3600)) < 60
    assert datetime.fromisoformat(body["expires_at"].replace("Z", "+00:00")).timestamp() == claims["exp"]


def test_the_issued_token_is_what_the_agent_then_calls_with(
    configured, service_account, make_registry, billing, alice, monkeypatch
):
    token = bearer_client(service_account).post(URL, {"service": "billing"}, format="json").json()["token"]
    monkeypatch.setenv(TOKEN_ENV, token)
    tool = make_registry().get("billing_whoAmI")

    result = async_to_sync(tool.run)(tool.validate({}), ToolContext(user=alice))

    assert result == {"user": "alice", "sub": str(alice.pk), "agent": "agent-svc"}
    assert billing.calls()[-1].headers["authorization"] == f"Bearer {token}"


def test_a_member_of_a_group_with_the_permission_is_a_service_account(configured, bob):
    group = Group.objects.create(name="service accounts")
    group.permissions.add(issue_permission())
    bob.groups.add(group)
    assert bearer_client(bob).post(URL, {"service": "billing"}, format="json").status_code == 200


def test_a_normal_user_is_forbidden(configured, alice_api):
    response = alice_api.post(URL, {"service": "billing"}, format="json")
    assert response.status_code == 403
    assert response.json() == {
        "error": "Only service accounts may obtain the agent's service token.",
        "code": "FORBIDDEN",
    }


def test_anonymous_is_unauthorized(configured, anon_api):
    response = anon_api.post(URL, {"service": "billing"}, format="json")
    assert response.status_code == 401
    assert response.json()["code"] == "AUTH_REQUIRED"


def test_an_unknown_service_is_invalid(configured, service_account):
    response = bearer_client(service_account).post(URL, {"service": "payroll"}, format="json")
    assert response.status_code == 400
    body = response.json()
    assert body["code"] == "INVALID"
    assert "No HTTP service named 'payroll' is configured (configured: billing)." in body["error"]


def test_the_endpoint_is_in_the_openapi_schema(client):
    schema = yaml.safe_load(client.get("/api/schema/").content)
    operation = schema["paths"][URL]["post"]
    assert set(operation["responses"]) >= {"200", "400", "401", "403"}
    assert "service account" in operation["description"]
