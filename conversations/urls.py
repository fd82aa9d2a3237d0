"""The pages; the API is in conversations/api/urls.py."""

from django.urls import path

from . import views

urlpatterns = [
    path("", views.home, name="home"),
    path("c/new/", views.conversation_new, name="chat-new"),
    path("c/new/draft/", views.conversation_draft, name="chat-new-draft"),
    path("c/<uuid:pk>/", views.chat, name="chat"),
    path("c/<uuid:pk>/rename/", views.conversation_rename, name="chat-rename"),
    path("c/<uuid:pk>/archive/", views.conversation_archive, name="chat-archive"),
    path("c/<uuid:pk>/restore/", views.conversation_restore, name="chat-restore"),
]
