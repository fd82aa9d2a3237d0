"""Calls to the real test service: both tokens on every call, only under the base URL, failures as clear sentences."""

from __future__ import annotations

import os
import time

import jwt
import pytest

from tests.http_service import SECRET, TOKEN_ENV, agent_token
from tools.http.client import build_url
from tools.http.exceptions import ServiceCallError, ServiceNotConfigured
from tools.registry import ToolArgumentsError, ToolContext

pytestmark = pytest.mark.django_db


async def call(tools, tool_name: str, user, /, **args):
    tool = tools.get(tool_name)
    return await tool.run(tool.validate(args), ToolContext(user=user))


async def test_a_get_tool_returns_the_service_json(tools, billing, alice):
    result = await call(tools, "billing_getInvoice", alice, invoice_id=7)

    assert result == {"id": 7, "status": "open", "owner": "alice", "amount": 120.5}
    [arrived] = billing.calls()
    assert (arrived.method, arrived.path, arrived.body) == ("GET", "/api/invoices/7", None)


async def test_every_call_carries_the_service_token_and_the_user_s_identity(tools, billing, alice, bob, monkeypatch):
    assert await call(tools, "billing_whoAmI", alice) == {"user": "alice", "sub": str(alice.pk), "agent": "agent-svc"}
    assert (await call(tools, "billing_whoAmI", bob))["user"] == "bob"

    first, second = billing.calls()
    assert first.headers["authorization"] == f"Bearer {os.environ[TOKEN_ENV]}"
    assert first.headers["user-agent"] == "AgentChat" and first.headers["accept"] == "application/json"
    # The identity, verified as a service would: signature, audience, issuer, expiry.
    claims = jwt.decode(
        first.headers["x-user-token"], SECRET, algorithms=["HS256"], audience="billing", issuer="agentchat"
    )
    assert claims["sub"] == str(alice.pk) and claims["username"] == "alice" and claims["token_type"] == "identity"
    assert claims["exp"] - claims["iat"] == 60 and abs(claims["iat"] - time.time()) < 5
    assert second.claims["username"] == "bob"
    assert first.claims["jti"] != second.claims["jti"]  # a fresh token for every call
    with pytest.raises(jwt.InvalidAudienceError):
        jwt.decode(first.headers["x-user-token"], SECRET, algorithms=["HS256"], audience="inventory")


async def test_the_identity_header_and_lifetime_are_configurable(make_registry, billing, alice, settings):
    settings.HTTP_IDENTITY_TOKEN_SECONDS = 20
    tools = make_registry(identity_header="X-Acting-User")
    with pytest.raises(ServiceCallError, match="401"):
        await call(tools, "billing_whoAmI", alice)  # this service only reads X-User-Token
    [arrived] = billing.calls()
    claims = jwt.decode(arrived.headers["x-acting-user"], SECRET, algorithms=["HS256"], audience="billing")
    assert claims["exp"] - claims["iat"] == 20 and "x-user-token" not in arrived.headers


async def test_query_parameters_and_json_bodies(tools, billing, alice):
    listing = await call(tools, "billing_listInvoices", alice, status="open", limit=5, tag=["a", "b"])
    assert listing["query"] == {"status": ["open"], "limit": ["5"], "tag": ["a", "b"]}

    await call(tools, "billing_listInvoices", alice)
    assert billing.calls()[-1].query == {}  # what the model left out is not sent

    refund = await call(tools, "billing_createRefund", alice, invoice_id=7, amount=10.5, reason="late")
    assert refund == {"refunded": {"amount": 10.5, "reason": "late"}, "invoice": 7}
    arrived = billing.calls()[-1]
    assert (arrived.method, arrived.path) == ("POST", "/api/invoices/7/refunds")
    assert arrived.headers["content-type"] == "application/json"

    assert await call(tools, "billing_delete_invoices_invoice_id", alice, invoice_id=7) == {"status": 204}


# --- failures become clear tool errors -----------------------------------------------------------


async def test_a_403_for_bob_is_a_clear_error_with_the_service_s_message(tools, billing, bob):
    with pytest.raises(ServiceCallError) as caught:
        await call(tools, "billing_getInvoice", bob, invoice_id=7)
    assert str(caught.value) == (
        "billing refused: this user may not do that (403 Forbidden): bob may not see invoices."
    )


async def test_404_and_500(tools, alice):
    with pytest.raises(ServiceCallError) as caught:
        await call(tools, "billing_getInvoice", alice, invoice_id=404)
    assert str(caught.value) == "billing found nothing there (404 Not Found): No invoice 404."

    with pytest.raises(ServiceCallError) as caught:
        await call(tools, "billing_brokenReport", alice)
    assert str(caught.value) == (
        "billing failed on its side (500 Internal Server Error): The billing database is down."
    )


async def test_a_slow_service_times_out(make_registry, alice):
    tools = make_registry(timeout=0.3)
    started = time.monotonic()
    with pytest.raises(ServiceCallError, match=r"^billing did not answer within 0\.3 s\.$"):
        await call(tools, "billing_slowReport", alice)
    assert time.monotonic() - started < 2


async def test_an_unreachable_service(make_registry, billing, alice):
    tools = make_registry()
    billing.stop()
    with pytest.raises(ServiceCallError, match=r"^Could not reach billing at 127\.0\.0\.1:\d+: "):
        await call(tools, "billing_getInvoice", alice, invoice_id=7)


async def test_redirects_are_not_followed(tools, billing, alice):
    with pytest.raises(ServiceCallError, match="302 Found: a redirect, which is not followed"):
        await call(tools, "billing_movedReport", alice)
    assert [r.path for r in billing.requests] == ["/api/moved"]


async def test_a_refused_service_token_never_shows_in_the_error(make_registry, billing, alice, monkeypatch):
    wrong = agent_token("another-secret-that-is-long-enough-0123456789")
    monkeypatch.setenv(TOKEN_ENV, wrong)
    tools = make_registry()
    with pytest.raises(ServiceCallError) as caught:
        await call(tools, "billing_getInvoice", alice, invoice_id=7)
    message = str(caught.value)
    assert message.startswith("billing did not accept the agent's credentials (401 Unauthorized): Bad service token")
    assert wrong not in message and "[hidden]" in message


async def test_a_missing_token_fails_the_call_naming_the_variable(make_registry, billing, alice, monkeypatch):
    monkeypatch.delenv(TOKEN_ENV)
    tools = make_registry()
    with pytest.raises(ServiceNotConfigured, match=f"billing is not configured: {TOKEN_ENV} is not set"):
        await call(tools, "billing_getInvoice", alice, invoice_id=7)
    assert billing.requests == []


async def test_calls_need_a_signed_in_user(tools, billing):
    from django.contrib.auth.models import AnonymousUser

    for nobody in (None, AnonymousUser()):
        with pytest.raises(ServiceCallError, match="only called on behalf of a signed-in user"):
            await call(tools, "billing_whoAmI", nobody)
    assert billing.requests == []


# --- never off the base URL ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("../admin", "must not contain '.' or '..' path segments"),
        ("..", "must not contain '.' or '..' path segments"),
        ("a/../../admin", "must not contain '.' or '..' path segments"),
        ("..\\admin", "must not contain '.' or '..' path segments"),
        ("http://evil.example/x", "must be a value, not a URL"),
        ("//evil.example/x", "must be a value, not a URL"),
        ("", "must not be empty"),
    ],
)
def test_path_parameters_that_would_climb_or_leave_are_refused(tools, billing, value, expected):
    with pytest.raises(ToolArgumentsError) as caught:
        tools.get("billing_getDocument").validate({"name": value})
    assert f"name: {expected}" in str(caught.value)
    assert billing.requests == []


async def test_other_path_values_are_one_encoded_segment_under_the_base(tools, billing, alice):
    result = await call(tools, "billing_getDocument", alice, name="a/b c?x=1#frag")
    assert result == {"document": "a%2Fb%20c%3Fx%3D1%23frag"}
    assert [(r.path, r.query) for r in billing.requests] == [("/api/documents/a%2Fb%20c%3Fx%3D1%23frag", {})]


def test_the_url_is_checked_even_without_the_argument_model(tools, make_services):
    [service] = make_services()
    operation = next(op for op in _operations(service) if op.name == "getDocument")
    assert build_url(service, operation, {"name": "x"}) == f"{service.base_url}/documents/x"
    for value in ("..", "../admin", "https://evil.example"):
        with pytest.raises(ServiceCallError, match="The path parameter name must"):
            build_url(service, operation, {"name": value})


def _operations(service):
    from tools.http.openapi import operations, read_document

    return operations(read_document(service), service=service.name, label=str(service))
