from channels.security.websocket import WebsocketDenier
from django.urls import path, re_path

from .consumers import ChatConsumer

# Any other path is refused at the handshake (HTTP 403), as a foreign origin is, rather than failing in the router.
websocket_urlpatterns = [
    path("ws/chat/<uuid:conversation_id>/", ChatConsumer.as_asgi()),
    re_path(r"", WebsocketDenier.as_asgi()),
]
