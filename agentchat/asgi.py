"""ASGI entry point: daphne serves HTTP through Django; the WebSocket stack joins here as it lands."""

import os

from channels.routing import ProtocolTypeRouter
from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "agentchat.settings")

django_asgi_app = get_asgi_application()

application = ProtocolTypeRouter({"http": django_asgi_app})
