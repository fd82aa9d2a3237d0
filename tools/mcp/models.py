from __future__ import annotations

from django.db import models
from django.utils.translation import gettext_lazy as _


class RegisteredTool(models.Model):
    """No table: the admin's read-only page of every tool the agent has, and of the MCP servers behind some."""

    class Meta:
        managed = False
        default_permissions = ("view",)
        verbose_name = _("registered tool")
        verbose_name_plural = _("registered tools")

    def __str__(self) -> str:
        return str(self._meta.verbose_name)
