"""Which browser pages may open a chat socket: this site itself, or an origin Django's CSRF check trusts.

Only a browser can be made to carry someone's session cookie to another site, and browsers always send
Origin on a WebSocket: a socket whose Origin is not this site (scheme, host and port, as the browser reached
it) or one of CSRF_TRUSTED_ORIGINS is refused at the handshake, as Django refuses such a form post. A client
that sends no Origin (a script) has only the credentials it was given, and passes.
"""

from __future__ import annotations

from channels.security.websocket import WebsocketDenier
from django.conf import settings
from django.http.request import is_same_domain, split_domain_port, validate_host


def _secure(scope, headers: dict[bytes, bytes]) -> bool:
    if scope.get("scheme") == "wss":
        return True
    proxy = settings.SECURE_PROXY_SSL_HEADER
    if not proxy:
        return False
    header, value = proxy
    name = header.removeprefix("HTTP_").replace("_", "-").lower().encode("latin1")
    return headers.get(name, b"").decode("latin1").split(",")[0].strip() == value


def origin_allowed(origin: str, scope) -> bool:
    headers = dict(scope.get("headers", []))
    host = headers.get(b"host", b"").decode("latin1")
    if not host or not validate_host(split_domain_port(host)[0], settings.ALLOWED_HOSTS):
        return False
    if origin == f"{'https' if _secure(scope, headers) else 'http'}://{host}":
        return True
    if origin in settings.CSRF_TRUSTED_ORIGINS:
        return True
    scheme, _, netloc = origin.partition("://")
    return any(
        trusted.startswith(f"{scheme}://*.") and is_same_domain(netloc, trusted.partition("://")[2][1:])
        for trusted in settings.CSRF_TRUSTED_ORIGINS
    )


class SameOriginValidator:
    def __init__(self, application):
        self.application = application

    async def __call__(self, scope, receive, send):
        origin = dict(scope.get("headers", [])).get(b"origin")
        if origin is None or origin_allowed(origin.decode("latin1"), scope):
            return await self.application(scope, receive, send)
        return await WebsocketDenier()(scope, receive, send)
