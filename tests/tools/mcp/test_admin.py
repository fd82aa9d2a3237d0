"""The admin's page of registered tools: every tool with where it comes from, and the MCP servers' state."""

from __future__ import annotations

import pytest
from django.apps import apps

pytestmark = pytest.mark.django_db

URL = "/admin/mcp_tools/registeredtool/"


@pytest.fixture
def shown(items, monkeypatch):
    monkeypatch.setattr(apps.get_app_config("mcp_tools"), "toolsets", [items])
    monkeypatch.setattr("tools.mcp.admin.registry", items.registry)


def test_the_page_lists_the_tools_and_the_servers(shown, client, admin_user):
    client.force_login(admin_user)
    page = client.get(URL)

    assert page.status_code == 200
    text = page.content.decode()
    assert "<code>items__delete_item</code>" in text and "mcp: items" in text
    assert "(from MCP server &#x27;items&#x27;) Delete an item for good." in text
    assert "connected" in text and "tests.mcp_server" in text and "stdio" in text
    assert "dashboards.create_branch" in text
    assert URL in client.get("/admin/").content.decode()  # on the index, under the app


def test_only_staff_may_look(shown, client, alice):
    client.force_login(alice)
    assert client.get(URL).status_code == 302
