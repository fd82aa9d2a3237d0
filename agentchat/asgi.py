"""ASGI entry point: HTTP through Django, on kept threads; WebSocket through the origin check, then auth, then the
router."""

import os

from django.core.asgi import get_asgi_application
from django.core.handlers.asgi import ASGIHandler
from django.core.signals import request_finished
from django.db import connections

from agentchat.request_threads import KeptThreads

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "agentchat.settings")

django_asgi_app = get_asgi_application()


def close_request_connections(**kwargs) -> None:
    """Over ASGI each request has database connections of its own, which Django drops as it ends but leaves open
    where connections persist (SQLite). Left to the garbage collector, they are closed, and their statements
    finalized, inside its passes on the event loop, which then last 40-80 ms and hold every socket up
    (docs/benchmarks.md). Closed here instead, in the request's own thread, as it finishes."""
    connections.close_all()


request_finished.connect(close_request_connections, sender=ASGIHandler)

from channels.auth import AuthMiddlewareStack  # noqa: E402 - needs the app registry loaded above
from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402

from agentchat.origins import SameOriginValidator  # noqa: E402
from conversations.routing import websocket_urlpatterns  # noqa: E402

application = ProtocolTypeRouter(
    {
        "http": KeptThreads(django_asgi_app),
        "websocket": SameOriginValidator(AuthMiddlewareStack(URLRouter(websocket_urlpatterns))),
    }
)
