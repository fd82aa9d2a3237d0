"""MCP_SERVERS / MCP_SERVERS_FILE: what a good list gives, and the clear start-up error a bad one gets."""

from __future__ import annotations

import json
import runpy

import pytest
from django.apps import apps
from django.conf import settings as live
from django.core.exceptions import ImproperlyConfigured

from tests.tools.dashboards.conftest import grant
from tools.mcp.config import parse_servers, servers_from_settings
from tools.registry import ToolRegistry

from .conftest import ROOT, SECRET, SECRET_ENV, http_entry, stdio_entry

URL = "http://127.0.0.1:9/mcp"


def parse(entries, tmp_path, variable="MCP_SERVERS", environ=None):
    return parse_servers(entries, variable=variable, base_dir=tmp_path, environ=environ or {SECRET_ENV: SECRET})


def test_a_stdio_server_runs_in_the_list_s_folder_with_its_environment(tmp_path):
    (tmp_path / "bin").mkdir()
    entry = {"name": "files", "command": ["bin/server", "--root", "."], "env": {"TOKEN": "a-${GH}-b", "MODE": "ro"}}
    [server] = parse([entry], tmp_path, environ={"GH": "secret-value"})

    assert server.command == (str(tmp_path / "bin/server"), "--root", ".")  # a relative program, from the folder
    assert server.cwd == str(tmp_path)
    assert server.env == {"TOKEN": "a-secret-value-b", "MODE": "ro"}
    assert server.transport == "stdio" and not server.identity and server.url is None
    assert (server.timeout, server.start_timeout, server.permission, server.allow) == (20, 15, None, None)
    assert "secret-value" not in repr(server)


def test_a_url_server_sends_the_identity_by_default(tmp_path):
    entry = http_entry(URL, headers={"Authorization": "Bearer ${TICKETS_TOKEN}"}, allow=["a"], confirm=["a"])
    [server] = parse([entry], tmp_path, environ={SECRET_ENV: SECRET, "TICKETS_TOKEN": "t0k3n"})

    assert server.transport == "streamable HTTP" and server.command == ()
    assert server.identity and server.identity_secret == SECRET and server.identity_header == "X-User-Token"
    assert server.headers == {"Authorization": "Bearer t0k3n"}
    assert server.allow == server.confirm == frozenset({"a"})
    assert SECRET not in repr(server) and "t0k3n" not in repr(server)
    assert str(server) == "MCP_SERVERS: server 'remote'"


def test_identity_is_a_choice_either_way(tmp_path):
    [stdio] = parse([stdio_entry(identity=True, identity_secret_env=SECRET_ENV)], tmp_path)
    [remote] = parse([{"name": "open", "url": URL, "identity": False}], tmp_path)
    assert stdio.identity and stdio.identity_secret == SECRET
    assert not remote.identity and remote.identity_secret == ""


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        (lambda e: "[{", "MCP_SERVERS is not valid JSON"),
        (lambda e: json.dumps(e), "MCP_SERVERS must be a JSON list of servers"),
        (lambda e: [{**e, "name": "my server"}], "server 'my server': name: must start with a letter"),
        (lambda e: [{**e, "name": "items-2"}], "server 'items-2': name: must start with a letter and hold"),
        (lambda e: [{**e, "name": 7}], "server #1: name: Input should be a valid string"),
        (lambda e: [e, e], "server 'items': the name is used by another server"),
        (lambda e: [{**e, "comand": ["x"]}], "server 'items': comand: Extra inputs are not permitted"),
        (lambda e: [{**e, "command": []}], "server 'items': command: List should have at least 1 item"),
        (lambda e: [{**e, "command": [" "]}], "server 'items': command: the program to run is empty"),
        (lambda e: [{k: v for k, v in e.items() if k != "command"}], "server 'items': give a command"),
        (lambda e: [{**e, "url": URL}], "server 'items': give command or url, not both"),
        (lambda e: [{**e, "headers": {"X-A": "b"}}], "server 'items': headers: only for a server with a url"),
        (lambda e: [{**e, "cwd": "nowhere"}], "server 'items': cwd: "),
        (lambda e: [{**e, "env": {"BAD NAME": "x"}}], "server 'items': env: must be the name of an environment var"),
        (lambda e: [{**e, "env": {"A": "${UNSET_MCP_VAR}"}}], "server 'items': env.A: the environment variable UNSET"),
        (lambda e: [{**e, "env": {"A": "${1x}"}}], "server 'items': env.A: ${1x} does not name an environment"),
        (lambda e: [{**e, "timeout": 0}], "server 'items': timeout: Input should be greater than 0"),
        (lambda e: [{**e, "permission": "nodot"}], "server 'items': permission: must be a Django permission"),
        (lambda e: [{**e, "safe": ["a"], "confirm": ["a"]}], "server 'items': a cannot be both safe and in need"),
        (lambda e: [{**e, "identity": True}], "server 'items': identity_secret_env: required to sign"),
        (lambda e: [{**e, "allow": "find_items"}], "server 'items': allow: Input should be a valid list"),
    ],
)
def test_a_bad_stdio_entry_stops_start_up_naming_the_server_and_the_field(tmp_path, change, expected):
    with pytest.raises(ImproperlyConfigured) as caught:
        parse(change(stdio_entry()), tmp_path)
    assert expected in str(caught.value)
    assert str(caught.value).startswith("MCP_SERVERS")


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        (lambda e: {**e, "url": "ftp://files.example/mcp"}, "server 'remote': url: must be an http:// or https://"),
        (lambda e: {**e, "url": "http://u:p@h.example/mcp"}, "url: must have no fragment or credentials"),
        (lambda e: {**e, "env": {"A": "b"}}, "server 'remote': env: only for a server with a command"),
        (lambda e: {**e, "headers": {"Content-Type": "x"}}, "headers: 'Content-Type' is not a header that may be set"),
        (lambda e: {**e, "headers": {"Mcp-Session-Id": "x"}}, "headers: 'Mcp-Session-Id' is not a header that may"),
        (lambda e: {**e, "identity_header": "Authorization"}, "identity_header: must be a header name of its own"),
        (lambda e: {k: v for k, v in e.items() if k != "identity_secret_env"}, "identity_secret_env: required"),
        (lambda e: {**e, "identity_secret_env": "UNSET_MCP_SECRET"}, "server 'remote': the environment variable UNS"),
    ],
)
def test_a_bad_url_entry_stops_start_up_naming_the_server_and_the_field(tmp_path, change, expected):
    with pytest.raises(ImproperlyConfigured, match=r"^MCP_SERVERS: server 'remote': ") as caught:
        parse([change(http_entry(URL))], tmp_path)
    assert expected in str(caught.value)


def test_a_short_identity_secret_is_refused(tmp_path):
    with pytest.raises(ImproperlyConfigured, match=f"{SECRET_ENV} must be at least 32 characters"):
        parse([http_entry(URL)], tmp_path, environ={SECRET_ENV: "short"})


# --- from the settings ---------------------------------------------------------------------------


def test_a_servers_file_runs_its_servers_in_its_own_folder(tmp_path, settings):
    folder = tmp_path / "conf"
    folder.mkdir()
    (folder / "mcp.json").write_text(json.dumps([{"name": "local", "command": ["./run.sh"]}]))
    settings.MCP_SERVERS_FILE, settings.MCP_SERVERS = str(folder / "mcp.json"), ""

    [server] = servers_from_settings()
    assert server.cwd == str(folder) and server.command == (str(folder / "run.sh"),)
    assert str(server) == "MCP_SERVERS_FILE: server 'local'"


def test_inline_servers_run_in_the_project_folder_and_none_is_fine(settings):
    settings.MCP_SERVERS_FILE, settings.MCP_SERVERS = "", ""
    assert servers_from_settings() == []
    settings.MCP_SERVERS = json.dumps([{"name": "local", "command": ["npx", "server"]}])
    [server] = servers_from_settings()
    assert server.cwd == str(live.BASE_DIR) and server.command == ("npx", "server")


def test_errors_name_the_variable(tmp_path, settings):
    """The reading is shared with HTTP_SERVICES (tests/tools/http/test_config.py); the names are the MCP ones."""
    settings.MCP_SERVERS_FILE, settings.MCP_SERVERS = str(tmp_path / "missing.json"), "[]"
    with pytest.raises(ImproperlyConfigured, match="Set MCP_SERVERS_FILE or MCP_SERVERS, not both"):
        servers_from_settings()
    settings.MCP_SERVERS_FILE = ""
    settings.MCP_SERVERS = "[{]"
    with pytest.raises(ImproperlyConfigured, match="MCP_SERVERS is not valid JSON"):
        servers_from_settings()


def test_the_example_list_is_valid_and_points_at_the_test_server():
    [server] = parse_servers((ROOT / "mcp_servers.example.json").read_text(), variable="X", base_dir=ROOT)
    assert server.command == (str(ROOT / ".venv/bin/python"), "-m", "tests.mcp_server")
    assert server.cwd == str(ROOT) and server.permission == "dashboards.create_branch"


def test_ready_registers_the_example_servers_and_the_first_lookup_starts_them(settings, monkeypatch, alice, bob):
    """The example list: its server's tools for alice (who may create branches), not for bob; deleting asks first."""
    settings.MCP_SERVERS_FILE, settings.MCP_SERVERS = str(ROOT / "mcp_servers.example.json"), ""
    fresh = ToolRegistry()
    monkeypatch.setattr("tools.registry.registry", fresh)
    app = apps.get_app_config("mcp_tools")
    monkeypatch.setattr(app, "toolsets", app.toolsets)  # put back after the test

    app.ready()

    [toolset] = app.toolsets
    assert toolset.connection.starts == 0  # nothing is started at start-up
    try:
        alice = grant(alice, "dashboards.create_branch")
        assert "items__find_items" in [tool.name for tool in fresh.permitted(alice)]
        assert toolset.connection.connected and fresh.permitted(bob) == []
        assert fresh.get("items__delete_item").requires_confirmation
    finally:
        toolset.connection.stop()


def test_no_server_is_configured_by_default():
    assert apps.get_app_config("mcp_tools").toolsets == []


def test_the_settings_and_their_defaults(monkeypatch):
    for name in ("MCP_SERVERS_FILE", "MCP_SERVERS"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("SECRET_KEY", "test-only-secret-key")
    config = runpy.run_path(str(live.BASE_DIR / "agentchat" / "settings.py"))
    assert (config["MCP_SERVERS_FILE"], config["MCP_SERVERS"]) == ("", "")
    assert "tools.mcp" in config["INSTALLED_APPS"]
