"""POST /api/auth/service-token/: the agent's service token for a configured service, for service accounts only."""

from __future__ import annotations

import logging

from django.apps import apps
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import permissions, serializers
from rest_framework.response import Response
from rest_framework.views import APIView

from agentchat.api import ErrorSerializer

from .config import Service
from .models import ISSUE_SERVICE_TOKEN
from .tokens import service_token

logger = logging.getLogger(__name__)


def configured_services() -> list[Service]:
    return apps.get_app_config("http_tools").services


class IsServiceAccount(permissions.BasePermission):
    message = gettext_lazy("Only service accounts may obtain the agent's service token.")

    def has_permission(self, request, view) -> bool:
        return bool(request.user and request.user.is_authenticated and request.user.has_perm(ISSUE_SERVICE_TOKEN))


class ServiceTokenRequestSerializer(serializers.Serializer):
    service = serializers.CharField(max_length=64, help_text="The name of a configured HTTP service.")

    def validate_service(self, value: str) -> Service:
        services = configured_services()
        found = next((service for service in services if service.name == value), None)
        if found is None:
            names = ", ".join(service.name for service in services) or _("none")
            raise serializers.ValidationError(
                _("No HTTP service named %(name)s is configured (configured: %(names)s).")
                % {"name": repr(value), "names": names}
            )
        return found


class ServiceTokenSerializer(serializers.Serializer):
    token = serializers.CharField(help_text="An HS256 JWT signed with the service's identity secret.")
    token_type = serializers.CharField(help_text='Always "Bearer".')
    service = serializers.CharField()
    expires_at = serializers.DateTimeField()


class ServiceTokenView(APIView):
    """Issue the agent's service token for one configured service (service accounts only).

    The token is a JWT with `token_type: "service"`, `aud` = the service, `iss` = "agentchat", `sub` and
    `service` naming the account, valid for SERVICE_TOKEN_DAYS. Put it in the variable the service's
    `token_env` names; the agent sends it as `Authorization: Bearer …` on every call to that service.
    """

    permission_classes = [permissions.IsAuthenticated, IsServiceAccount]

    @extend_schema(
        request=ServiceTokenRequestSerializer,
        responses={
            200: ServiceTokenSerializer,
            400: OpenApiResponse(ErrorSerializer, description="No such service is configured."),
            401: OpenApiResponse(ErrorSerializer, description="Not signed in, or the token is invalid or expired."),
            403: OpenApiResponse(ErrorSerializer, description="Signed in, but not a service account."),
        },
    )
    def post(self, request):
        body = ServiceTokenRequestSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        service: Service = body.validated_data["service"]
        token, expires_at = service_token(request.user, service)
        logger.info("service token for %s issued to %s", service.name, request.user.get_username())
        return Response(
            ServiceTokenSerializer(
                {"token": token, "token_type": "Bearer", "service": service.name, "expires_at": expires_at}
            ).data
        )
