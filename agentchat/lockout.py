"""Sign-in lockout with django-axes: a limit per username and a higher one per client address, and the answers
a locked-out client gets from the sign-in page and from the token endpoint (docs/operations.md#sign-in-lockout)."""

from __future__ import annotations

import contextlib
import ipaddress
import math
from datetime import timedelta

from axes.handlers.database import AxesDatabaseHandler
from axes.handlers.proxy import AxesProxyHandler
from axes.helpers import get_client_username, get_cool_off, get_credentials, get_failure_limit, get_lockout_parameters
from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.forms import AuthenticationForm
from django.db.models import Sum
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render
from django.utils.http import url_has_allowed_host_and_scheme
from django.utils.translation import ngettext
from rest_framework import exceptions, status
from rest_framework_simplejwt.serializers import TokenObtainPairSerializer as SimpleJWTTokenObtainPairSerializer

from agentchat.errors import ApiError, wants_json

# The longest username the user model takes. The token endpoint accepts any length, which axes' column (255) would
# refuse on PostgreSQL.
USERNAME_MAX_LENGTH = 150


def client_address(request: HttpRequest) -> str | None:
    """The address the lockout counts. Behind LOGIN_PROXY_COUNT proxies that each append to X-Forwarded-For, the
    one the outermost proxy saw: entries further left were written by the client and could be anything."""
    address = request.META.get("REMOTE_ADDR")
    forwarded = request.META.get("HTTP_X_FORWARDED_FOR", "")
    count = settings.LOGIN_PROXY_COUNT
    if count and forwarded:
        entries = [entry.strip() for entry in forwarded.split(",")]
        with contextlib.suppress(ValueError):
            address = str(ipaddress.ip_address(entries[max(0, len(entries) - count)]))
    return address


def client_username(request: HttpRequest, credentials: dict | None) -> str | None:
    """Axes' own lookup of the username, cut to USERNAME_MAX_LENGTH."""
    field = get_user_model().USERNAME_FIELD
    source = credentials or getattr(request, "data", None) or request.POST
    value = source.get(field) if hasattr(source, "get") else None
    return None if value is None else str(value)[:USERNAME_MAX_LENGTH]


class LockoutHandler(AxesDatabaseHandler):
    """Axes' database handler with a limit of its own for the client address, which offices share."""

    def _limited_attempts(self, request, credentials):
        """(limit, failed attempts within the cool-off) for each lockout parameter."""
        per_username = get_failure_limit(request, credentials)
        parameters = get_lockout_parameters(request, credentials)
        attempts_list = self.get_user_attempts(request, credentials)
        for parameter, attempts in zip(parameters, attempts_list, strict=True):
            by_address = parameter in ("ip_address", ["ip_address"])
            yield (settings.LOGIN_FAILURE_LIMIT_PER_ADDRESS if by_address else per_username), attempts

    def get_failures(self, request, credentials: dict | None = None) -> int:
        # Axes locks out when this reaches AXES_FAILURE_LIMIT: each count is shifted by the difference between that
        # limit and its own, so whichever reaches its own limit first locks.
        limit = get_failure_limit(request, credentials)
        shifted = [
            (attempts.aggregate(total=Sum("failures_since_start"))["total"] or 0) + limit - own_limit
            for own_limit, attempts in self._limited_attempts(request, credentials)
        ]
        return max([0, *shifted])

    def locked_for(self, request, credentials: dict | None = None) -> timedelta:
        """How long until every count is back under its limit, as the failures that reach it age out."""
        now = request.axes_attempt_time
        until = now
        for own_limit, attempts in self._limited_attempts(request, credentials):
            total = 0
            newest_first = attempts.order_by("-attempt_time").values_list("attempt_time", "failures_since_start")
            for attempt_time, failures in newest_first:
                total += failures
                if total >= own_limit:
                    until = max(until, attempt_time + get_cool_off(request))
                    break
        return until - now

    def reset_user_attempts(self, request, credentials: dict | None = None) -> int:
        # A sign-in vouches for its own username only. Clearing its address's count too would let the owner of any
        # account try passwords on every other one without end.
        username = get_client_username(request, credentials)
        return self.reset_attempts(username=username) if username else 0


def locked_for(request, credentials: dict | None = None) -> timedelta:
    AxesProxyHandler.update_request(request)
    return AxesProxyHandler.get_implementation().locked_for(request, credentials)


def _minutes(wait: timedelta) -> int:
    return max(1, math.ceil(wait.total_seconds() / 60))


def _retry_after(wait: timedelta) -> int:
    return max(1, math.ceil(wait.total_seconds()))


def locked_out_error(wait: timedelta) -> ApiError:
    minutes = _minutes(wait)
    error = ApiError(
        ngettext(
            "Too many failed sign-ins. Try again in %(minutes)s minute.",
            "Too many failed sign-ins. Try again in %(minutes)s minutes.",
            minutes,
        )
        % {"minutes": minutes},
        code="RATE_LIMITED",
        status_code=status.HTTP_429_TOO_MANY_REQUESTS,
    )
    error.wait = _retry_after(wait)  # DRF's handler sends it as Retry-After
    return error


def lockout_response(request: HttpRequest, original_response=None, credentials=None) -> HttpResponse:
    """AXES_LOCKOUT_CALLABLE, for the sign-in page (and the admin's). Axes' middleware passes the original
    response and the credentials when it runs sync but only the credentials, in the response's place, under ASGI:
    neither is used."""
    wait = locked_for(request)
    if wants_json(request):
        error = locked_out_error(wait)
        response = JsonResponse(error.body(), status=error.status_code)
    else:
        next_url = request.POST.get("next", "")
        if not url_has_allowed_host_and_scheme(next_url, {request.get_host()}, require_https=request.is_secure()):
            next_url = ""
        # An unbound form: a bound one would authenticate once more when the page reads its errors.
        form = AuthenticationForm(request, initial={"username": client_username(request, None) or ""})
        context = {"form": form, "next": next_url, "locked_out": True, "lockout_minutes": _minutes(wait)}
        response = render(request, "registration/login.html", context, status=status.HTTP_429_TOO_MANY_REQUESTS)
    response["Retry-After"] = str(_retry_after(wait))
    return response


class TokenObtainPairSerializer(SimpleJWTTokenObtainPairSerializer):
    """simplejwt's, answering a locked-out client 429 in the one error shape. simplejwt sends no user_logged_in,
    so a token obtained clears the username's failures here, as a sign-in on the page does through axes."""

    def validate(self, attrs):
        request = self.context.get("request")
        try:
            data = super().validate(attrs)
        except exceptions.AuthenticationFailed:
            if getattr(request, "axes_locked_out", False):
                raise locked_out_error(locked_for(request)) from None
            raise
        if request is not None and settings.AXES_ENABLED and settings.AXES_RESET_ON_SUCCESS:
            AxesProxyHandler.update_request(request)
            credentials = get_credentials(self.user.get_username())
            AxesProxyHandler.get_implementation().reset_user_attempts(request, credentials)
        return data
