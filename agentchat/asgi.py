"""ASGI entry point: HTTP through Django; WebSocket through the origin check, then auth, then the router."""

import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "agentchat.settings")

django_asgi_app = get_asgi_application()

from channels.auth import AuthMiddlewareStack  # noqa: E402 - needs the app registry loaded above
from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402
from channels.security.websocket import OriginValidator  # noqa: E402
from django.conf import settings  # noqa: E402

from conversations.api.uploads import UploadSizeGuard  # noqa: E402
from conversations.routing import websocket_urlpatterns  # noqa: E402


class BrowserOriginValidator(OriginValidator):
    """Refuse a foreign Origin; let a client that sends none (a script, not a browser) through.

    Browsers always send Origin on a WebSocket, and only a browser can be made to carry someone's
    session cookie to another site; a script has only the credentials it was given.
    """

    def valid_origin(self, parsed_origin) -> bool:
        return parsed_origin is None or super().valid_origin(parsed_origin)


application = ProtocolTypeRouter(
    {
        "http": UploadSizeGuard(django_asgi_app),
        "websocket": BrowserOriginValidator(
            AuthMiddlewareStack(URLRouter(websocket_urlpatterns)), settings.ALLOWED_HOSTS
        ),
    }
)
