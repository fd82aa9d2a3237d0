"""The pages (docs/pages.md): the conversation list and the chat, server-rendered; static/js/chat.js makes them live."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils.http import url_has_allowed_host_and_scheme
from django.utils.translation import gettext as _
from django.views.decorators.http import require_POST

from agentchat.agent.calls import Outcome
from tools.documents.detect import CLAIMED
from tools.documents.limits import MAX_UPLOAD_BYTES, MiB

from . import selectors, services
from .markdown import render_markdown
from .models import Conversation, Message

LIST_LIMIT = 100
SIDEBAR_LIMIT = 30
HISTORY_LIMIT = 500
TITLE_MAX = 200
# What the browser accepts before uploading (the names the reader checks content against); the server checks the
# content again (docs/tools.md).
UPLOAD_EXTENSIONS = list(CLAIMED)


@dataclass
class ToolCard:
    """One tool call as the page shows it: its arguments and, once it ran, its result."""

    id: str
    name: str
    args: Any
    state: str = "running"  # running, waiting (for the owner's decision), ok, error, rejected, cancelled, unknown
    output: str = ""
    result_id: int | None = None

    @property
    def args_json(self) -> str:
        return json.dumps(self.args, ensure_ascii=False, indent=2)

    @property
    def output_pretty(self) -> str:
        """A JSON result indented for reading; any other text as it is."""
        try:
            return json.dumps(json.loads(self.output), ensure_ascii=False, indent=2)
        except ValueError:
            return self.output


@dataclass
class Entry:
    """A row of the chat: a message (user or assistant, with its calls) or a tool result without its call."""

    message: Message
    html: str = ""
    cards: list[ToolCard] = field(default_factory=list)


def _owned(request: HttpRequest, pk) -> Conversation:
    conversation = selectors.conversation_for(request.user, pk)
    if conversation is None:
        raise Http404
    return conversation


def _list_filters(request: HttpRequest) -> dict[str, Any]:
    return {
        "archived": request.GET.get("archived") == "1",
        "search": request.GET.get("q", "").strip()[:TITLE_MAX],
    }


# How a call that ended is shown; every outcome not named here is a failure.
CARD_STATES = {
    Outcome.DONE: "ok",
    Outcome.REJECTED: "rejected",
    Outcome.CANCELLED: "cancelled",
    Outcome.UNKNOWN: "unknown",
}


def _result_state(result: Message) -> str:
    return CARD_STATES.get(result.outcome, "error")


def _timeline(history: list[Message], pending_call_ids: set[str]) -> list[Entry]:
    results = {message.tool_call_id: message for message in history if message.role == Message.Role.TOOL}
    shown: set[str] = set()
    entries: list[Entry] = []
    for message in history:
        if message.role == Message.Role.USER:
            entries.append(Entry(message=message))
        elif message.role == Message.Role.ASSISTANT:
            entry = Entry(message=message, html=render_markdown(message.content))
            for call in message.tool_calls or []:
                card = ToolCard(id=str(call.get("id", "")), name=str(call.get("name", "")), args=call.get("args", {}))
                result = results.get(card.id)
                if result is not None:
                    card.state, card.output, card.result_id = _result_state(result), result.content, result.pk
                    shown.add(card.id)
                elif card.id in pending_call_ids:
                    card.state = "waiting"
                entry.cards.append(card)
            entries.append(entry)
        elif message.role == Message.Role.TOOL and message.tool_call_id not in shown:
            # A result whose call is not in view (it should not happen): shown on its own.
            card = ToolCard(id=message.tool_call_id, name=message.tool_name, args={})
            card.state, card.output, card.result_id = _result_state(message), message.content, message.pk
            entries.append(Entry(message=message, cards=[card]))
    return entries


def _upload_rules() -> dict[str, Any]:
    return {"maxBytes": MAX_UPLOAD_BYTES, "extensions": UPLOAD_EXTENSIONS}


@login_required
def home(request: HttpRequest) -> HttpResponse:
    filters = _list_filters(request)
    conversations = selectors.conversations_for(request.user, **filters)[:LIST_LIMIT]
    return render(request, "conversations/home.html", {"conversations": conversations, **filters})


@login_required
def chat(request: HttpRequest, pk) -> HttpResponse:
    conversation = _owned(request, pk)
    history = selectors.as_shown(conversation, list(selectors.history_for(conversation)))
    hidden = max(len(history) - HISTORY_LIMIT, 0)
    pending = {item.tool_call_id for item in selectors.pending_confirmations(conversation)}
    context = {
        "conversation": conversation,
        "entries": _timeline(history[hidden:], pending),
        "hidden_count": hidden,
        "sidebar": selectors.conversations_for(request.user)[:SIDEBAR_LIMIT],
        "upload_rules": _upload_rules(),
        "accept": ",".join(UPLOAD_EXTENSIONS),
        "max_mb": MAX_UPLOAD_BYTES // MiB,
        "demo_model": settings.LLM_PROVIDER == "local",
    }
    return render(request, "conversations/chat.html", context)


@login_required
@require_POST
def conversation_new(request: HttpRequest) -> HttpResponse:
    conversation = services.conversation_create(owner=request.user)
    return redirect("chat", pk=conversation.pk)


@login_required
@require_POST
def conversation_rename(request: HttpRequest, pk) -> HttpResponse:
    conversation = _owned(request, pk)
    title = " ".join(request.POST.get("title", "").split())[:TITLE_MAX]
    if title:
        services.conversation_rename(conversation=conversation, title=title, actor=request.user)
        messages.success(request, _("Renamed."))
    else:
        messages.error(request, _("A title cannot be empty."))
    return _back(request, reverse("chat", kwargs={"pk": conversation.pk}))


@login_required
@require_POST
def conversation_archive(request: HttpRequest, pk) -> HttpResponse:
    conversation = _owned(request, pk)
    services.conversation_archive(conversation=conversation, actor=request.user)
    messages.success(request, _("“%(title)s” was archived.") % {"title": conversation.title or _("New conversation")})
    return _back(request, reverse("home"))


@login_required
@require_POST
def conversation_restore(request: HttpRequest, pk) -> HttpResponse:
    conversation = _owned(request, pk)
    services.conversation_restore(conversation=conversation, actor=request.user)
    messages.success(request, _("“%(title)s” was restored.") % {"title": conversation.title or _("New conversation")})
    return _back(request, reverse("chat", kwargs={"pk": conversation.pk}))


def _back(request: HttpRequest, default: str) -> HttpResponse:
    """To the page the form was on (when it is one of ours), else to `default`."""
    target = request.POST.get("next", "")
    if target and url_has_allowed_host_and_scheme(
        target, allowed_hosts={request.get_host()}, require_https=request.is_secure()
    ):
        return redirect(target)
    return redirect(default)
