from django.apps import AppConfig
from django.utils.translation import gettext_lazy as _


class ConversationsConfig(AppConfig):
    name = "conversations"
    verbose_name = _("Conversations")

    def ready(self) -> None:
        from django.contrib.auth.signals import user_login_failed

        from . import live_auth
        from .services import audit_login_failure

        user_login_failed.connect(audit_login_failure, dispatch_uid="conversations.audit_login_failure")
        live_auth.connect()
