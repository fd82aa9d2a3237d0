from __future__ import annotations

from django.apps import AppConfig
from django.utils.translation import gettext_lazy as _


class DashboardsConfig(AppConfig):
    name = "tools.dashboards"
    label = "dashboards"
    verbose_name = _("Dashboards")
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        # The tools register themselves on the global registry when their module is imported.
        from . import tools  # noqa: F401
