"""ASGI entry point: HTTP through Django; WebSocket through the origin check, then auth, then the router."""

import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "agentchat.settings")

django_asgi_app = get_asgi_application()

from channels.auth import AuthMiddlewareStack  # noqa: E402 - needs the app registry loaded above
from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402

from agentchat.origins import SameOriginValidator  # noqa: E402
from conversations.routing import websocket_urlpatterns  # noqa: E402

application = ProtocolTypeRouter(
    {
        "http": django_asgi_app,
        "websocket": SameOriginValidator(AuthMiddlewareStack(URLRouter(websocket_urlpatterns))),
    }
)
