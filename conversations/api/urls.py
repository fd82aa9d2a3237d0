from django.urls import path
from rest_framework.routers import SimpleRouter

from .views import ActiveRunView, AgentChatView, AttachmentsView, ConversationViewSet

router = SimpleRouter()
router.register("assistant/conversations", ConversationViewSet, basename="conversation")

urlpatterns = [
    path("assistant/conversations/<uuid:pk>/attachments/", AttachmentsView.as_view(), name="conversation-attachments"),
    *router.urls,
    path("agent/conversations/<uuid:pk>/active", ActiveRunView.as_view(), name="conversation-active"),
    path("agent/chat", AgentChatView.as_view(), name="agent-chat"),
]
