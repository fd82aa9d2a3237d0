"""A server reached over streamable HTTP: connected at the first lookup, the user's identity on each call, and a
clear tool error when it is down."""

from __future__ import annotations

import logging

import jwt
import pytest
from asgiref.sync import sync_to_async

from tests.tcp_proxy import TCPProxy
from tools.mcp.exceptions import McpCallError, ServerUnavailable
from tools.mcp.toolset import RETRY_AFTER

from .conftest import SECRET, SECRET_ENV, http_entry, run, toolset_of


async def test_each_call_carries_the_user_s_identity_token(remote, alice, bob):
    seen = await run(remote, "remote__whoami", {}, user=alice)
    assert seen["meta"] is None
    claims = jwt.decode(
        seen["header"],
        SECRET,
        algorithms=["HS256"],
        audience="remote",
        issuer="agentchat",
        options={"require": ["exp", "iat", "sub", "aud", "iss"]},
    )
    assert claims["token_type"] == "identity" and claims["username"] == "alice" and claims["sub"] == str(alice.pk)
    assert claims["exp"] - claims["iat"] == 60

    # Each call its own: another user's call carries that user.
    other = await run(remote, "remote__whoami", {}, user=bob)
    assert jwt.decode(other["header"], SECRET, algorithms=["HS256"], audience="remote")["username"] == "bob"


async def test_a_url_server_s_tools_are_registered_like_any_other(remote, alice):
    tool = remote.registry.get("remote__delete_item")
    assert tool.requires_confirmation and tool.source.kind == "mcp"
    assert await run(remote, "remote__find_items", {"text": "dune"}, user=alice) == "Dune"


async def test_the_token_lifetime_is_the_http_services_one(remote, alice, settings):
    settings.HTTP_IDENTITY_TOKEN_SECONDS = 5
    seen = await run(remote, "remote__whoami", {}, user=alice)
    claims = jwt.decode(seen["header"], SECRET, algorithms=["HS256"], audience="remote")
    assert claims["exp"] - claims["iat"] == 5


def test_a_server_down_at_the_first_lookup_has_no_tools_for_now(monkeypatch, caplog):
    monkeypatch.setenv(SECRET_ENV, SECRET)
    with caplog.at_level(logging.ERROR):
        toolset = toolset_of(http_entry("http://127.0.0.1:9/mcp"))
    try:
        assert toolset.registry.all() == []  # not asked again before RETRY_AFTER
        assert "MCP server 'remote' could not be reached: " in caplog.text
        assert f"Its tools are left out (trying again in {RETRY_AFTER:g} s)." in caplog.text
    finally:
        toolset.connection.stop()


@pytest.fixture
def proxied(http_server, monkeypatch):
    """The HTTP server behind a proxy the test can cut, and its tools."""
    monkeypatch.setenv(SECRET_ENV, SECRET)
    host, port = http_server.removeprefix("http://").split("/")[0].split(":")
    with TCPProxy((host, int(port))) as proxy:
        toolset = toolset_of(http_entry(f"http://127.0.0.1:{proxy.port}/mcp", name="proxied"))
        yield proxy, toolset
        toolset.connection.stop()


async def test_a_server_that_went_down_is_a_clear_tool_error_then_comes_back(proxied, alice):
    proxy, toolset = proxied
    assert await run(toolset, "proxied__find_items", {"text": "dune"}, user=alice) == "Dune"

    await sync_to_async(proxy.cut)()
    with pytest.raises(McpCallError, match="MCP server 'proxied'"):
        await run(toolset, "proxied__find_items", {"text": "dune"}, user=alice)
    with pytest.raises(ServerUnavailable, match=r"^MCP server 'proxied' could not be reached: "):
        await run(toolset, "proxied__find_items", {"text": "dune"}, user=alice)
    assert toolset.registry.has("proxied__find_items")  # still offered: the next call may find it back

    proxy.restore()
    assert await run(toolset, "proxied__find_items", {"text": "dune"}, user=alice) == {
        "result": "Dune",
        "notice": "The connection to MCP server 'proxied' had been lost; it was made again for this call.",
    }
