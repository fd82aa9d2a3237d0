from __future__ import annotations

from datetime import timedelta

import pytest
from rest_framework.test import APIClient
from rest_framework_simplejwt.tokens import AccessToken, RefreshToken

from conversations.models import AuditEvent

pytestmark = pytest.mark.django_db

LIST = "/api/assistant/conversations/"


def obtain(client, username, password):
    return client.post("/api/auth/token/", {"username": username, "password": password}, format="json")


def test_obtain_and_use_a_token_pair(anon_api, alice):
    response = obtain(anon_api, "alice", "alice-password")
    assert response.status_code == 200
    tokens = response.json()
    assert set(tokens) == {"access", "refresh"}

    anon_api.credentials(HTTP_AUTHORIZATION=f"Bearer {tokens['access']}")
    assert anon_api.get(LIST).status_code == 200


def test_wrong_password_is_401_and_audited(anon_api, alice):
    response = obtain(anon_api, "alice", "nope")
    assert response.status_code == 401
    assert response.json()["code"] == "AUTH_REQUIRED"
    assert AuditEvent.objects.filter(kind="auth_failed", data__username="alice").count() == 1


def test_missing_fields_are_400(anon_api):
    response = anon_api.post("/api/auth/token/", {}, format="json")
    assert response.status_code == 400
    body = response.json()
    assert body["code"] == "INVALID" and {"username", "password"} <= set(body["fields"])


def test_inactive_user_gets_no_token(anon_api, alice):
    alice.is_active = False
    alice.save()
    assert obtain(anon_api, "alice", "alice-password").status_code == 401


def test_refresh_gives_a_working_access_token(anon_api, alice):
    refresh = obtain(anon_api, "alice", "alice-password").json()["refresh"]
    response = anon_api.post("/api/auth/token/refresh/", {"refresh": refresh}, format="json")
    assert response.status_code == 200
    anon_api.credentials(HTTP_AUTHORIZATION=f"Bearer {response.json()['access']}")
    assert anon_api.get(LIST).status_code == 200


def test_refresh_rejects_garbage_and_access_tokens(anon_api, alice):
    garbage = anon_api.post("/api/auth/token/refresh/", {"refresh": "garbage"}, format="json")
    assert garbage.status_code == 401 and garbage.json()["code"] == "AUTH_REQUIRED"
    access = str(AccessToken.for_user(alice))
    assert anon_api.post("/api/auth/token/refresh/", {"refresh": access}, format="json").status_code == 401


def test_expired_access_token_is_refused_with_a_clear_message(alice):
    token = AccessToken.for_user(alice)
    token.set_exp(lifetime=-timedelta(seconds=1))
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")
    response = client.get(LIST)
    assert response.status_code == 401
    assert response.json() == {"error": "The token has expired. Sign in again or refresh it.", "code": "AUTH_REQUIRED"}


def test_expired_refresh_token_is_refused(anon_api, alice):
    token = RefreshToken.for_user(alice)
    token.set_exp(lifetime=-timedelta(seconds=1))
    response = anon_api.post("/api/auth/token/refresh/", {"refresh": str(token)}, format="json")
    assert response.status_code == 401 and "expired" in response.json()["error"]


def test_forged_token_is_refused(alice):
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION="Bearer " + str(AccessToken.for_user(alice))[:-4] + "AAAA")
    response = client.get(LIST)
    assert response.status_code == 401
    assert response.json() == {"error": "The token is not valid. Sign in again.", "code": "AUTH_REQUIRED"}


def test_sign_in_page_signs_in_and_out(client, alice):
    page = client.get("/accounts/login/")
    assert page.status_code == 200 and b'name="password"' in page.content

    signed_in = client.post("/accounts/login/", {"username": "alice", "password": "alice-password"})
    assert signed_in.status_code == 302 and signed_in.url == "/"
    home = client.get("/")
    assert home.status_code == 200 and b"alice" in home.content

    signed_out = client.post("/accounts/logout/")
    assert signed_out.status_code == 302
    assert client.get("/").status_code == 302


def test_home_lists_only_your_conversations(client, alice, bob):
    from conversations import services

    services.conversation_create(owner=alice, title="Alice's report")
    services.conversation_create(owner=bob, title="Bob's plans")
    client.force_login(alice)
    page = client.get("/").content.decode()
    assert "Alice&#x27;s report" in page and "Bob" not in page


def test_wrong_password_on_the_page_says_so(client, alice):
    response = client.post("/accounts/login/", {"username": "alice", "password": "bad"})
    assert response.status_code == 200
    assert b"do not match" in response.content
