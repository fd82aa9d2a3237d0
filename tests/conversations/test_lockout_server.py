"""Sign-in lockout against a real daphne process: the token endpoint, and the page through ASGI middleware.

The server sits behind one (pretend) proxy, LOGIN_PROXY_COUNT=1, so each test picks its client address with
X-Forwarded-For. Rows are committed (transactional db) so the server sees them.
"""

from __future__ import annotations

import http.cookiejar
import json
import re
import urllib.error
import urllib.parse
import urllib.request
from datetime import timedelta

import pytest
from axes.models import AccessAttempt
from django.contrib.auth import get_user_model
from django.contrib.auth.hashers import PBKDF2PasswordHasher
from django.db.models import F

from tests.servers import DaphneProcess, _launch, server_env

pytestmark = pytest.mark.django_db(transaction=True)

LIMIT = 3
PER_ADDRESS = 5
LOCKED = {"error": "Too many failed sign-ins. Try again in 15 minutes.", "code": "RATE_LIMITED"}


@pytest.fixture(scope="module")
def server(django_db_setup, django_db_blocker, tmp_path_factory):
    with django_db_blocker.unblock():
        env = server_env(
            {
                "LOGIN_FAILURE_LIMIT": str(LIMIT),
                "LOGIN_FAILURE_LIMIT_PER_ADDRESS": str(PER_ADDRESS),
                "LOGIN_LOCKOUT_MINUTES": "15",
                "LOGIN_PROXY_COUNT": "1",
            }
        )
    process = DaphneProcess(env, log_dir=tmp_path_factory.mktemp("daphne"), name="lockout")
    _launch([process], timeout=20)
    yield process
    process.stop()


def make_user(username: str):
    # The server checks passwords with the project's hashers, not the tests' MD5 one; few rounds keep it quick.
    hasher = PBKDF2PasswordHasher()
    user = get_user_model().objects.create_user(username)
    user.password = hasher.encode(f"{username}-password", hasher.salt(), iterations=1000)
    user.save(update_fields=["password"])
    return user


def call(opener, url: str, *, data: bytes | None = None, headers: dict[str, str]) -> tuple[int, dict, str]:
    request = urllib.request.Request(url, data=data, headers=headers, method="POST" if data is not None else "GET")  # noqa: S310
    try:
        with opener.open(request, timeout=20) as response:
            return response.status, dict(response.headers), response.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, dict(exc.headers), exc.read().decode()


def obtain(server, username: str, password: str, address: str) -> tuple[int, dict, dict]:
    status, headers, body = call(
        urllib.request.build_opener(),
        server.http_url + "/api/auth/token/",
        data=json.dumps({"username": username, "password": password}).encode(),
        headers={"Content-Type": "application/json", "Accept": "application/json", "X-Forwarded-For": address},
    )
    return status, headers, json.loads(body)


class Browser:
    """Cookies and the CSRF token, as a browser keeps them for the sign-in form."""

    def __init__(self, server, address: str):
        self.server = server
        self.address = address
        self.opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(http.cookiejar.CookieJar()))

    def sign_in(self, username: str, password: str) -> tuple[int, dict, str]:
        headers = {"X-Forwarded-For": self.address, "Accept-Language": "en"}
        _, _, form = call(self.opener, self.server.http_url + "/accounts/login/", headers=headers)
        token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', form).group(1)
        fields = {"csrfmiddlewaretoken": token, "username": username, "password": password, "next": "/"}
        return call(
            self.opener,
            self.server.http_url + "/accounts/login/",
            data=urllib.parse.urlencode(fields).encode(),
            headers={**headers, "Content-Type": "application/x-www-form-urlencoded"},
        )


def test_the_token_endpoint_locks_a_username_until_the_cool_off_has_passed(server):
    make_user("alice")
    make_user("bob")

    statuses = [obtain(server, "alice", "wrong", "198.51.100.1")[0] for _ in range(LIMIT)]
    assert statuses == [401] * (LIMIT - 1) + [429]

    status, headers, body = obtain(server, "alice", "alice-password", "198.51.100.2")
    assert (status, body) == (429, LOCKED)
    assert 840 < int(headers["Retry-After"]) <= 900
    assert obtain(server, "bob", "bob-password", "198.51.100.1")[0] == 200

    AccessAttempt.objects.update(attempt_time=F("attempt_time") - timedelta(minutes=16))
    status, _, body = obtain(server, "alice", "alice-password", "198.51.100.1")
    assert status == 200 and set(body) == {"access", "refresh"}


def test_the_page_says_signing_in_is_locked(server):
    make_user("alice")
    browser = Browser(server, "198.51.100.3")

    for _ in range(LIMIT - 1):
        status, _, page = browser.sign_in("alice", "wrong")
        assert status == 200 and "do not match" in page

    status, headers, page = browser.sign_in("alice", "wrong")
    assert status == 429 and headers["Retry-After"] == "900"
    assert "Too many failed sign-ins: signing in is locked for now. Try again in 15 minutes." in page

    status, _, page = browser.sign_in("alice", "alice-password")
    assert status == 429 and "Try again in 15 minutes." in page
    _, _, home = call(browser.opener, server.http_url + "/", headers={"X-Forwarded-For": browser.address})
    assert 'name="password"' in home  # still the sign-in form: no session


def test_one_address_is_locked_for_every_username(server):
    for index in range(PER_ADDRESS):
        make_user(f"user{index}")
    make_user("bob")

    statuses = [obtain(server, f"user{index}", "wrong", "203.0.113.1")[0] for index in range(PER_ADDRESS)]
    assert statuses == [401] * (PER_ADDRESS - 1) + [429]

    assert obtain(server, "bob", "bob-password", "203.0.113.1")[:3:2] == (429, LOCKED)
    # A client that writes its own X-Forwarded-For entry is still counted by the address the proxy saw.
    assert obtain(server, "bob", "bob-password", "192.0.2.9, 203.0.113.1")[0] == 429
    assert obtain(server, "bob", "bob-password", "203.0.113.2")[0] == 200
