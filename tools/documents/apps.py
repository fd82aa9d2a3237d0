from __future__ import annotations

import importlib.util

from django.apps import AppConfig
from django.core.exceptions import ImproperlyConfigured
from django.utils.translation import gettext_lazy as _


def require_defusedxml() -> None:
    """openpyxl parses XLSX XML with defusedxml only when it is installed: without it, say so and do not start."""
    if importlib.util.find_spec("defusedxml") is None:
        raise ImproperlyConfigured(
            "defusedxml is not installed: XLSX files would be parsed without protection against XML attacks "
            "(billion laughs). Install it: pip install --no-deps -r requirements.txt"
        )
    from openpyxl.xml import DEFUSEDXML

    if not DEFUSEDXML:
        raise ImproperlyConfigured(
            "openpyxl is not using defusedxml (is OPENPYXL_DEFUSEDXML set to something other than True?)."
        )


class DocumentsConfig(AppConfig):
    name = "tools.documents"
    label = "documents"
    verbose_name = _("Documents")

    def ready(self) -> None:
        require_defusedxml()
        # The document tools register themselves on the global registry when their module is imported.
        from . import tools  # noqa: F401
