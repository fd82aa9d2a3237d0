from __future__ import annotations

from django.db import models
from django.utils.translation import gettext_lazy as _

ISSUE_SERVICE_TOKEN = "http_tools.issue_service_token"  # noqa: S105 (a permission's name)


class HttpToolsPermissions(models.Model):
    """No table: the holder of this app's permissions.

    A service account is a user (or a member of a group) granted `issue_service_token`.
    """

    class Meta:
        managed = False
        default_permissions = ()
        permissions = [("issue_service_token", _("Can obtain the agent's service token (a service account)"))]

    def __str__(self) -> str:
        return str(self._meta.verbose_name)
