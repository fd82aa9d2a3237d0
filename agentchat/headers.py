"""Response headers Django has no setting for."""

from __future__ import annotations

from django.conf import settings
from django.utils.deprecation import MiddlewareMixin


class PermissionsPolicyMiddleware(MiddlewareMixin):
    """Permissions-Policy on every response: the browser features in PERMISSIONS_POLICY are refused to the page
    and to anything it embeds, so injected script could not reach them either."""

    def __init__(self, get_response):
        super().__init__(get_response)
        self.policy = ", ".join(f"{feature}=()" for feature in settings.PERMISSIONS_POLICY)

    def process_response(self, request, response):
        if self.policy:
            response.headers.setdefault("Permissions-Policy", self.policy)
        return response
