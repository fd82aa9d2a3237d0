"""Sign-in lockout (agentchat/lockout.py): per username and per client address, on the API and the page."""

from __future__ import annotations

import runpy
from datetime import timedelta
from pathlib import Path

import pytest
from axes.models import AccessAttempt
from django.core.exceptions import ImproperlyConfigured
from django.db.models import F
from django.test import Client, RequestFactory

from agentchat.lockout import client_address
from conversations.models import AuditEvent

pytestmark = pytest.mark.django_db

TOKEN = "/api/auth/token/"
LOGIN = "/accounts/login/"
LOCKED = {"error": "Too many failed sign-ins. Try again in 15 minutes.", "code": "RATE_LIMITED"}
SETTINGS_PATH = Path(__file__).resolve().parents[2] / "agentchat" / "settings.py"
ENV_NAMES = ["LOGIN_FAILURE_LIMIT", "LOGIN_FAILURE_LIMIT_PER_ADDRESS", "LOGIN_LOCKOUT_MINUTES", "LOGIN_PROXY_COUNT"]


def obtain(client, username, password, address="127.0.0.1"):
    return client.post(TOKEN, {"username": username, "password": password}, format="json", REMOTE_ADDR=address)


def sign_in(client, username, password, address="127.0.0.1", **extra):
    return client.post(LOGIN, {"username": username, "password": password}, REMOTE_ADDR=address, **extra)


def fail(client, username, times, address="127.0.0.1"):
    return [obtain(client, username, "wrong", address).status_code for _ in range(times)]


def age_attempts(minutes: float) -> None:
    """As if the stored failures had happened `minutes` earlier."""
    AccessAttempt.objects.update(attempt_time=F("attempt_time") - timedelta(minutes=minutes))


# --- the API ---------------------------------------------------------------------------------------


def test_the_failure_that_reaches_the_limit_and_the_right_password_after_it_are_refused(anon_api, alice):
    assert fail(anon_api, "alice", 4) == [401] * 4

    fifth = obtain(anon_api, "alice", "wrong")
    assert fifth.status_code == 429 and fifth.json() == LOCKED
    assert fifth["Retry-After"] == "900"

    right = obtain(anon_api, "alice", "alice-password")
    assert right.status_code == 429 and right.json() == LOCKED
    assert "access" not in right.json()


def test_a_locked_username_is_locked_from_every_address_and_nobody_else_is(anon_api, alice, bob):
    fail(anon_api, "alice", 5)

    assert obtain(anon_api, "alice", "alice-password", address="198.51.100.7").status_code == 429
    assert obtain(anon_api, "bob", "bob-password").status_code == 200


def test_the_right_password_works_once_the_cool_off_has_passed(anon_api, alice):
    fail(anon_api, "alice", 5)
    age_attempts(14)
    assert obtain(anon_api, "alice", "alice-password").status_code == 429

    age_attempts(1.1)
    assert obtain(anon_api, "alice", "alice-password").status_code == 200
    assert fail(anon_api, "alice", 1) == [401]


def test_refused_attempts_do_not_push_the_end_of_the_lockout_back(anon_api, alice):
    fail(anon_api, "alice", 5)
    age_attempts(10)

    refused = obtain(anon_api, "alice", "alice-password")
    assert refused.json() == {"error": "Too many failed sign-ins. Try again in 5 minutes.", "code": "RATE_LIMITED"}
    assert 240 < int(refused["Retry-After"]) <= 300
    obtain(anon_api, "alice", "wrong")

    age_attempts(5.1)
    assert obtain(anon_api, "alice", "alice-password").status_code == 200


def test_a_token_obtained_clears_the_usernames_failures(anon_api, alice):
    fail(anon_api, "alice", 4)
    assert obtain(anon_api, "alice", "alice-password").status_code == 200
    assert fail(anon_api, "alice", 4) == [401] * 4
    assert not AccessAttempt.objects.filter(failures_since_start__gt=4).exists()


def test_one_address_is_locked_after_its_own_higher_limit_whatever_the_username(anon_api, alice):
    statuses = [obtain(anon_api, f"guess-{index}", "wrong").status_code for index in range(20)]
    assert statuses == [401] * 19 + [429]

    assert obtain(anon_api, "alice", "alice-password").json() == LOCKED
    assert obtain(anon_api, "somebody-new", "wrong").status_code == 429
    assert obtain(anon_api, "alice", "alice-password", address="203.0.113.5").status_code == 200


def test_a_sign_in_does_not_clear_its_addresss_failures(anon_api, alice):
    for index in range(19):
        obtain(anon_api, f"guess-{index}", "wrong")
    assert obtain(anon_api, "alice", "alice-password").status_code == 200

    assert obtain(anon_api, "guess-19", "wrong").status_code == 429


def test_the_refresh_endpoint_keeps_working_for_a_locked_username(anon_api, alice):
    refresh = obtain(anon_api, "alice", "alice-password").json()["refresh"]
    fail(anon_api, "alice", 5)

    response = anon_api.post("/api/auth/token/refresh/", {"refresh": refresh}, format="json")
    assert response.status_code == 200 and "access" in response.json()


def test_an_overlong_username_is_refused_not_a_server_error(anon_api):
    response = obtain(anon_api, "x" * 400, "wrong")
    assert response.status_code == 401
    assert AccessAttempt.objects.get().username == "x" * 150


def test_the_limits_and_the_cool_off_come_from_the_settings(anon_api, alice, settings):
    settings.AXES_FAILURE_LIMIT = 2
    settings.AXES_COOLOFF_TIME = timedelta(minutes=1)
    assert fail(anon_api, "alice", 2) == [401, 429]
    assert obtain(anon_api, "alice", "alice-password").json() == {
        "error": "Too many failed sign-ins. Try again in 1 minute.",
        "code": "RATE_LIMITED",
    }

    settings.LOGIN_FAILURE_LIMIT_PER_ADDRESS = 3
    assert fail(anon_api, "bob", 1, address="192.0.2.1") == [401]
    assert fail(anon_api, "carol", 1, address="192.0.2.1") == [401]
    assert fail(anon_api, "dave", 1, address="192.0.2.1") == [429]


# --- the page --------------------------------------------------------------------------------------


def test_the_page_says_signing_in_is_locked_with_429(client, alice, bob):
    for _ in range(4):
        assert b"do not match" in sign_in(client, "alice", "wrong").content

    fifth = sign_in(client, "alice", "wrong")
    assert fifth.status_code == 429 and fifth["Retry-After"] == "900"
    page = fifth.content.decode()
    assert "Too many failed sign-ins: signing in is locked for now. Try again in 15 minutes." in page
    assert "do not match" not in page
    assert 'name="password"' in page and 'value="alice"' in page

    right = sign_in(client, "alice", "alice-password")
    assert right.status_code == 429 and b"Try again in 15 minutes." in right.content
    assert client.get("/").status_code == 302

    other = Client()
    assert sign_in(other, "bob", "bob-password").status_code == 302
    assert other.get("/").status_code == 200


def test_the_page_says_it_in_russian(client, alice):
    for _ in range(5):
        response = sign_in(client, "alice", "wrong", HTTP_ACCEPT_LANGUAGE="ru")
    assert response.status_code == 429
    assert "Слишком много неудачных попыток входа: вход пока заблокирован. Попробуйте снова через 15 минут." in (
        response.content.decode()
    )


def test_the_page_keeps_where_to_go_after_signing_in(client, alice):
    for _ in range(5):
        response = client.post(LOGIN, {"username": "alice", "password": "wrong", "next": "/c/new/"})
    assert 'name="next" value="/c/new/"' in response.content.decode()

    for _ in range(2):
        response = client.post(LOGIN, {"username": "alice", "password": "wrong", "next": "https://evil.example/"})
    assert "evil.example" not in response.content.decode()


def test_the_admins_sign_in_is_locked_too(client, admin_user):
    for _ in range(5):
        response = client.post("/admin/login/", {"username": "admin", "password": "wrong", "next": "/admin/"})
    assert response.status_code == 429 and b"Try again in 15 minutes." in response.content

    response = client.post("/admin/login/", {"username": "admin", "password": "admin-password", "next": "/admin/"})
    assert response.status_code == 429
    assert client.get("/admin/").status_code == 302


def test_a_sign_in_on_the_page_clears_the_usernames_failures(client, alice):
    for _ in range(4):
        sign_in(client, "alice", "wrong")
    assert sign_in(client, "alice", "alice-password").status_code == 302
    client.post("/accounts/logout/")

    for _ in range(4):
        assert sign_in(client, "alice", "wrong").status_code == 200


def test_page_and_api_failures_add_up(client, anon_api, alice):
    for _ in range(3):
        sign_in(client, "alice", "wrong")
    assert fail(anon_api, "alice", 2) == [401, 429]
    assert sign_in(client, "alice", "alice-password").status_code == 429


# --- the audit log and the admin -------------------------------------------------------------------


def test_the_lockout_is_in_the_audit_log(anon_api, client, alice):
    fail(anon_api, "alice", 5)
    obtain(anon_api, "alice", "alice-password")
    sign_in(client, "alice", "alice-password")

    events = [event.data for event in AuditEvent.objects.filter(kind="auth_failed").order_by("created_at", "id")]
    assert events == [{"username": "alice", "path": TOKEN}] * 4 + [
        {"username": "alice", "path": TOKEN, "locked_out": True},
        {"username": "alice", "path": TOKEN, "locked_out": True},
        {"username": "alice", "path": LOGIN, "locked_out": True},
    ]
    assert "alice-password" not in str(events)


def test_the_admin_lists_the_failed_attempts(anon_api, admin_user, alice):
    fail(anon_api, "alice", 5)
    admin = Client()
    admin.force_login(admin_user)

    page = admin.get("/admin/axes/accessattempt/")
    assert page.status_code == 200
    html = page.content.decode()
    assert "alice" in html and "Locked Out" in html


# --- settings and the client address ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("forwarded", "count", "expected"),
    [
        ("203.0.113.9", 0, "127.0.0.1"),
        ("203.0.113.9", 1, "203.0.113.9"),
        ("198.51.100.1, 203.0.113.9", 1, "203.0.113.9"),
        ("198.51.100.1, 203.0.113.9, 10.0.0.2", 2, "203.0.113.9"),
        ("203.0.113.9", 2, "203.0.113.9"),
        ("not-an-address", 1, "127.0.0.1"),
        (None, 1, "127.0.0.1"),
    ],
)
def test_the_client_address_comes_from_the_proxy_header_only_when_configured(settings, forwarded, count, expected):
    settings.LOGIN_PROXY_COUNT = count
    headers = {"HTTP_X_FORWARDED_FOR": forwarded} if forwarded else {}
    request = RequestFactory().post(LOGIN, REMOTE_ADDR="127.0.0.1", **headers)
    assert client_address(request) == expected


def test_a_spoofed_forwarded_header_does_not_dodge_the_address_limit(anon_api, settings):
    settings.LOGIN_FAILURE_LIMIT_PER_ADDRESS = 3
    body = {"username": "guess", "password": "wrong"}
    statuses = [
        anon_api.post(TOKEN, body, format="json", HTTP_X_FORWARDED_FOR=f"10.9.0.{index}").status_code
        for index in range(3)
    ]
    assert statuses == [401, 401, 429]


@pytest.fixture
def env(monkeypatch):
    for name in ENV_NAMES:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("SECRET_KEY", "test-only-secret-key")
    return monkeypatch


def test_settings_defaults(env):
    config = runpy.run_path(str(SETTINGS_PATH))
    assert config["AXES_FAILURE_LIMIT"] == 5
    assert config["LOGIN_FAILURE_LIMIT_PER_ADDRESS"] == 20
    assert config["AXES_COOLOFF_TIME"] == timedelta(minutes=15)
    assert config["LOGIN_PROXY_COUNT"] == 0
    assert config["AUTHENTICATION_BACKENDS"][0] == "axes.backends.AxesStandaloneBackend"
    assert config["MIDDLEWARE"][-1] == "axes.middleware.AxesMiddleware"


def test_settings_from_the_environment(env):
    env.setenv("LOGIN_FAILURE_LIMIT", "3")
    env.setenv("LOGIN_FAILURE_LIMIT_PER_ADDRESS", "50")
    env.setenv("LOGIN_LOCKOUT_MINUTES", "60")
    env.setenv("LOGIN_PROXY_COUNT", "1")
    config = runpy.run_path(str(SETTINGS_PATH))
    assert config["AXES_FAILURE_LIMIT"] == 3
    assert config["LOGIN_FAILURE_LIMIT_PER_ADDRESS"] == 50
    assert config["AXES_COOLOFF_TIME"] == timedelta(hours=1)
    assert config["LOGIN_PROXY_COUNT"] == 1


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("LOGIN_FAILURE_LIMIT", "five"),
        ("LOGIN_FAILURE_LIMIT", "0"),
        ("LOGIN_FAILURE_LIMIT_PER_ADDRESS", "-1"),
        ("LOGIN_LOCKOUT_MINUTES", "0"),
        ("LOGIN_PROXY_COUNT", "-1"),
    ],
)
def test_a_bad_setting_names_its_variable(env, name, value):
    env.setenv(name, value)
    with pytest.raises(ImproperlyConfigured, match=name):
        runpy.run_path(str(SETTINGS_PATH))
