"""One error shape for every HTTP answer: {"error": "<human sentence>", "code": "<MACHINE_CODE>", ...}, the sentence in
the language LocaleMiddleware chose for the request."""

from __future__ import annotations

from django.core.exceptions import PermissionDenied as DjangoPermissionDenied
from django.http import Http404, JsonResponse
from django.utils.translation import gettext as _
from django.views import defaults
from rest_framework import exceptions, status
from rest_framework.response import Response
from rest_framework.views import exception_handler
from rest_framework_simplejwt.exceptions import InvalidToken

from agentchat.agent.providers import ProviderError, ProviderNotConfigured
from agentchat.sentences import token_problem, translate
from tools.documents.exceptions import DocumentError

CODES: list[tuple[type[Exception], str]] = [
    (exceptions.NotAuthenticated, "AUTH_REQUIRED"),
    (exceptions.AuthenticationFailed, "AUTH_REQUIRED"),
    (exceptions.PermissionDenied, "FORBIDDEN"),
    (exceptions.NotFound, "NOT_FOUND"),
    (exceptions.MethodNotAllowed, "METHOD_NOT_ALLOWED"),
    (exceptions.NotAcceptable, "NOT_ACCEPTABLE"),
    (exceptions.UnsupportedMediaType, "UNSUPPORTED_MEDIA_TYPE"),
    (exceptions.Throttled, "RATE_LIMITED"),
    (exceptions.ParseError, "INVALID"),
    (exceptions.ValidationError, "INVALID"),
]


class ApiError(exceptions.APIException):
    """An error raised by our own code with its machine code and any extra keys for the body."""

    def __init__(self, message: str, *, code: str, status_code: int = status.HTTP_400_BAD_REQUEST, **extra):
        super().__init__(detail=message, code=code)
        self.status_code = status_code
        self.machine_code = code
        self.extra = extra

    def body(self) -> dict:
        """The one error shape: {"error": <sentence>, "code": <CODE>, ...extra}."""
        return {"error": str(self.detail), "code": self.machine_code, **self.extra}


def _sentence(detail) -> str:
    if isinstance(detail, list):
        return " ".join(_sentence(item) for item in detail)
    if isinstance(detail, dict):
        if "detail" in detail:
            return _sentence(detail["detail"])
        return " ".join(f"{field}: {_sentence(value)}" for field, value in detail.items())
    return str(detail)


def _provider_error(exc: ProviderError) -> ApiError:
    if isinstance(exc, ProviderNotConfigured):
        return ApiError(translate(exc.message), code="PROVIDER_ERROR", status_code=status.HTTP_502_BAD_GATEWAY)
    return ApiError(
        _("LLM provider error"),
        code="PROVIDER_ERROR",
        status_code=status.HTTP_502_BAD_GATEWAY,
        detail=translate(exc.message),
    )


def api_exception_handler(exc: Exception, context: dict) -> Response | None:
    if isinstance(exc, ProviderError):
        exc = _provider_error(exc)
    elif isinstance(exc, DocumentError):
        exc = ApiError(translate(exc.message), code=exc.code, status_code=exc.status, **exc.extra)
    elif isinstance(exc, Http404):
        exc = exceptions.NotFound()
    elif isinstance(exc, DjangoPermissionDenied):
        exc = exceptions.PermissionDenied()
    response = exception_handler(exc, context)
    if response is None:
        return None
    if isinstance(exc, ApiError):
        body = exc.body()
    else:
        code = next((code for cls, code in CODES if isinstance(exc, cls)), "ERROR")
        if isinstance(exc, InvalidToken):
            message = _(token_problem(str(exc.detail)))
        elif isinstance(exc, exceptions.NotFound):
            message = _("Not found.")
        elif isinstance(exc, exceptions.ValidationError) and isinstance(exc.detail, dict):
            message = _("The request is not valid. %(problems)s") % {"problems": _sentence(exc.detail)}
        else:
            message = _sentence(exc.detail)
        body = {"error": message, "code": code}
        if isinstance(exc, exceptions.ValidationError) and isinstance(exc.detail, dict):
            body["fields"] = exc.detail
    response.data = body
    return response


def wants_json(request) -> bool:
    return request.path.startswith("/api/")


def not_found(request, exception=None):
    if wants_json(request):
        return JsonResponse({"error": _("Not found."), "code": "NOT_FOUND"}, status=404)
    return defaults.page_not_found(request, exception)


def server_error(request):
    if wants_json(request):
        return JsonResponse({"error": _("Something went wrong on our side."), "code": "SERVER_ERROR"}, status=500)
    return defaults.server_error(request)
