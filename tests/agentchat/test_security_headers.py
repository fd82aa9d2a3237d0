"""The security headers on every kind of response: the CSP, the Permissions-Policy, and HSTS over HTTPS only."""

from __future__ import annotations

import base64
import hashlib
import re

import pytest
from django.test import Client

from conversations import services
from conversations.models import Message
from tests.agentchat.test_settings import load_settings

pytestmark = pytest.mark.django_db

POLICY = {
    "default-src": ["'self'"],
    "script-src": ["'self'"],
    "style-src": ["'self'"],
    "img-src": ["'self'", "data:"],
    "connect-src": ["'self'"],
    "frame-ancestors": ["'none'"],
    "base-uri": ["'self'"],
    "form-action": ["'self'"],
    "object-src": ["'none'"],
}
DENIED_FEATURES = ["camera", "microphone", "geolocation", "payment", "usb", "serial", "hid", "midi"]
TABLE = "| quarter | revenue |\n| :-- | --: |\n| Q1 | 1,200 |\n"


def csp(response) -> dict[str, list[str]]:
    directives = [part.split() for part in response["Content-Security-Policy"].split(";")]
    return {name: values for name, *values in directives}


def sha256(source: str) -> str:
    return f"'sha256-{base64.b64encode(hashlib.sha256(source.encode()).digest()).decode()}'"


@pytest.fixture
def alice_client(alice) -> Client:
    client = Client()
    client.force_login(alice)
    return client


@pytest.fixture
def chat_url(alice) -> str:
    conversation = services.conversation_create(owner=alice, title="Revenue")
    Message.objects.create(conversation=conversation, role="assistant", content=f"By quarter:\n\n{TABLE}")
    return f"/c/{conversation.pk}/"


def assert_strict(response) -> dict[str, list[str]]:
    assert response.status_code == 200
    policy = csp(response)
    for name, values in POLICY.items():
        assert policy[name][: len(values)] == values, name
    assert policy["script-src"] == ["'self'"]
    header = response["Content-Security-Policy"]
    assert "'unsafe-inline'" not in header and "'unsafe-eval'" not in header
    # Keywords and hashes only: no other host, no scheme but data: images.
    sources = {source for values in policy.values() for source in values}
    assert all(source.startswith("'") and source.endswith("'") for source in sources - {"data:"}), sources
    features = dict(item.strip().split("=") for item in response["Permissions-Policy"].split(","))
    for feature in DENIED_FEATURES:
        assert features[feature] == "()", feature
    assert response["X-Content-Type-Options"] == "nosniff"
    assert response["Referrer-Policy"] == "same-origin"
    assert "Strict-Transport-Security" not in response
    return policy


def test_chat_page_is_strict_and_its_only_inline_styles_are_the_hashed_table_alignments(alice_client, chat_url):
    response = alice_client.get(chat_url)
    policy = assert_strict(response)
    assert policy["style-src"] == ["'self'"]
    html = response.content.decode()
    # Data blocks (JSON) are never run, so the CSP leaves them alone; every script that runs is a file.
    inline = re.findall(r"<script(?![^>]*\ssrc=)[^>]*>", html)
    assert all('type="application/json"' in tag for tag in inline), inline
    assert re.findall(r"\son[a-z]+=", html) == []
    styles = re.findall(r'\sstyle="([^"]*)"', html)
    assert "text-align:right" in styles
    assert policy["style-src-attr"][0] == "'unsafe-hashes'"
    assert {sha256(style) for style in styles} <= set(policy["style-src-attr"])


def test_sign_in_page_is_strict():
    assert_strict(Client().get("/accounts/login/"))


def test_api_response_is_strict(alice_api):
    assert_strict(alice_api.get("/api/assistant/conversations/"))


def test_static_file_is_strict():
    assert_strict(Client().get("/static/js/chat.js"))


def test_api_docs_add_only_the_hash_of_their_inline_style():
    page = Client().get("/api/docs/")
    policy = assert_strict(page)
    html = page.content.decode()
    [style] = re.findall(r"<style>(.*?)</style>", html, re.S)
    assert policy["style-src"] == ["'self'", sha256(style)]
    # Swagger UI's start-up script comes from a URL of its own, not inline.
    scripts = re.findall(r"<script([^>]*)>", html)
    assert scripts and all(" src=" in attributes for attributes in scripts), scripts
    [init_url] = re.findall(r'<script src="([^"]*script=[^"]*)"', html)
    init = Client().get(init_url.replace("&amp;", "&"))
    assert init.status_code == 200
    assert init["Content-Type"].startswith("application/javascript")
    assert "SwaggerUIBundle(" in init.content.decode()


def test_hsts_only_over_https_and_only_when_configured(settings):
    assert "Strict-Transport-Security" not in Client().get("/accounts/login/", secure=True)
    settings.SECURE_HSTS_SECONDS = 31536000
    settings.SECURE_HSTS_INCLUDE_SUBDOMAINS = True
    assert "Strict-Transport-Security" not in Client().get("/accounts/login/")
    response = Client().get("/accounts/login/", secure=True)
    assert response["Strict-Transport-Security"] == "max-age=31536000; includeSubDomains"


def test_hsts_behind_a_proxy_that_terminates_tls(settings):
    settings.SECURE_HSTS_SECONDS = 3600
    settings.SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
    assert "Strict-Transport-Security" not in Client().get("/accounts/login/", HTTP_X_FORWARDED_PROTO="http")
    response = Client().get("/accounts/login/", HTTP_X_FORWARDED_PROTO="https")
    assert response["Strict-Transport-Security"] == "max-age=3600"


def test_hsts_settings_come_from_the_environment(monkeypatch):
    monkeypatch.setenv("SECRET_KEY", "test-only-secret-key")
    names = ["SECURE_HSTS_SECONDS", "SECURE_HSTS_INCLUDE_SUBDOMAINS", "SECURE_HSTS_PRELOAD", "SECURE_PROXY_SSL_HEADER"]
    for name in names:
        monkeypatch.delenv(name, raising=False)
    config = load_settings()
    assert [config[name] for name in names] == [0, False, False, None]

    monkeypatch.setenv("SECURE_HSTS_SECONDS", "63072000")
    monkeypatch.setenv("SECURE_HSTS_INCLUDE_SUBDOMAINS", "1")
    monkeypatch.setenv("SECURE_HSTS_PRELOAD", "true")
    monkeypatch.setenv("SECURE_PROXY_SSL_HEADER", "X-Forwarded-Proto")
    config = load_settings()
    assert [config[name] for name in names] == [63072000, True, True, ("HTTP_X_FORWARDED_PROTO", "https")]
