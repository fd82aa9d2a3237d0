from django.apps import AppConfig
from django.utils.translation import gettext_lazy as _


class ToolsConfig(AppConfig):
    name = "tools"
    verbose_name = _("Tools")
