from __future__ import annotations

from django.apps import AppConfig
from django.utils.translation import gettext_lazy as _


class HttpToolsConfig(AppConfig):
    name = "tools.http"
    label = "http_tools"
    verbose_name = _("HTTP services as tools")

    def ready(self) -> None:
        from tools.registry import registry

        from .config import Service, services_from_settings
        from .toolset import register_services

        self.services: list[Service] = services_from_settings()
        register_services(registry, self.services)
