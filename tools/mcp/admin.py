from __future__ import annotations

from typing import TYPE_CHECKING, Any

from django.apps import apps
from django.contrib import admin
from django.core.exceptions import PermissionDenied
from django.template.response import TemplateResponse
from django.urls import path
from django.utils.translation import gettext_lazy as _

from agentchat.admin import ReadOnlyAdminMixin
from tools.registry import registry

from .models import RegisteredTool

if TYPE_CHECKING:
    from .toolset import ServerTools


def _server_row(toolset: ServerTools) -> dict[str, Any]:
    connection = toolset.connection
    if connection.connected:
        state = _("connected")
    elif connection.problem:
        state = _("not available: %(problem)s") % {"problem": connection.problem}
    else:
        state = _("not started yet")
    return {"server": toolset.server, "state": state, "tools": len(toolset.names), "starts": connection.starts}


@admin.register(RegisteredTool)
class RegisteredToolAdmin(ReadOnlyAdminMixin, admin.ModelAdmin):
    """One page, no rows in a table: the registry as it is in this process, and the MCP servers' state."""

    def get_urls(self):
        name = f"{self.opts.app_label}_{self.opts.model_name}_changelist"
        return [path("", self.admin_site.admin_view(self.changelist_view), name=name)]

    def changelist_view(self, request, extra_context=None):
        if not self.has_view_or_change_permission(request):
            raise PermissionDenied
        context = {
            **self.admin_site.each_context(request),
            "opts": self.opts,
            "title": _("Registered tools"),
            "tools": sorted(registry.all(), key=lambda tool: tool.name),
            "servers": [_server_row(toolset) for toolset in apps.get_app_config("mcp_tools").toolsets],
        }
        return TemplateResponse(request, "admin/mcp_tools/registered_tools.html", context)
