from __future__ import annotations

from typing import TYPE_CHECKING

from django.apps import AppConfig
from django.utils.translation import gettext_lazy as _

if TYPE_CHECKING:
    from .toolset import ServerTools


class McpToolsConfig(AppConfig):
    name = "tools.mcp"
    label = "mcp_tools"
    verbose_name = _("MCP servers as tools")

    def ready(self) -> None:
        from tools.registry import registry

        from .config import servers_from_settings

        self.toolsets: list[ServerTools] = []
        # The MCP SDK takes more than half a second to import: a process with no server configured never loads it.
        if servers := servers_from_settings():
            from .toolset import register_servers

            self.toolsets = register_servers(registry, servers)
