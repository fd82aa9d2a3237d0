from __future__ import annotations

from django.apps import AppConfig
from django.utils.translation import gettext_lazy as _


class McpToolsConfig(AppConfig):
    name = "tools.mcp"
    label = "mcp_tools"
    verbose_name = _("MCP servers as tools")

    def ready(self) -> None:
        from tools.registry import registry

        from .config import servers_from_settings
        from .toolset import ServerTools, register_servers

        self.toolsets: list[ServerTools] = register_servers(registry, servers_from_settings())
