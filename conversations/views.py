"""The pages (docs/pages.md): the conversation list and the chat, server-rendered; static/js/chat.js makes them live."""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils import timezone
from django.utils.formats import date_format
from django.utils.html import format_html
from django.utils.http import url_has_allowed_host_and_scheme
from django.utils.safestring import SafeString
from django.utils.translation import gettext as _
from django.views.decorators.http import require_http_methods, require_POST

from agentchat.agent.calls import Outcome
from agentchat.sentences import translate
from tools.documents.detect import CLAIMED
from tools.documents.limits import MAX_UPLOAD_BYTES, MiB

from . import selectors, services
from .decisions import decisions_for
from .markdown import render_markdown
from .models import Conversation, Message, PendingConfirmation
from .search import match_of, pieces

LIST_LIMIT = 100
SIDEBAR_LIMIT = 30
HISTORY_LIMIT = 500
TITLE_MAX = 200
# What the browser accepts before uploading (the names the reader checks content against); the server checks the
# content again (docs/tools.md).
UPLOAD_EXTENSIONS = list(CLAIMED)
# Session keys: the first message of a conversation begun on the start page, which its chat page sends; the
# conversation just archived, which the list offers to bring back.
FIRST_MESSAGE = "agentchat.first_message"
JUST_ARCHIVED = "agentchat.just_archived"


@dataclass
class Decision:
    """What the owner decided about a call, as the record on its card says it (templates/conversations/_decision.html).

    `variant`: approved, edited, rejected, rejected-reason (rejected, saying why), superseded (by a new message) or
    expired; `args`: what it runs with, for an approval or an edit.
    """

    variant: str
    who: str = ""
    at: datetime | None = None
    args: Any = None
    reason: str = ""

    @classmethod
    def of(cls, confirmation: PendingConfirmation) -> Decision | None:
        """None while it waits for the owner."""
        Status = PendingConfirmation.Status
        if confirmation.status == Status.PENDING:
            if confirmation.expires_at > timezone.now():
                return None
            return cls("expired", at=confirmation.expires_at)
        if confirmation.status in (Status.SUPERSEDED, Status.EXPIRED):
            return cls(confirmation.status, at=confirmation.decided_at)
        who = confirmation.decided_by.get_username() if confirmation.decided_by else _("someone")
        decision = cls(confirmation.status, who=who, at=confirmation.decided_at, reason=confirmation.reason)
        if confirmation.status == Status.REJECTED:
            decision.variant = "rejected-reason" if confirmation.reason else "rejected"
        else:
            decision.args = confirmation.edited_args if confirmation.status == Status.EDITED else confirmation.args
        return decision

    # The person's, the time's and the reason's markup in the translated sentence: the script fills the same
    # elements in the empty records the chat page carries.
    @property
    def who_html(self) -> SafeString:
        return format_html('<strong class="decision-who">{}</strong>', self.who)

    @property
    def when_html(self) -> SafeString:
        if self.at is None:
            return format_html('<time class="decision-when">{}</time>', "")
        shown = date_format(timezone.localtime(self.at), "SHORT_DATETIME_FORMAT")
        return format_html('<time class="decision-when" datetime="{}">{}</time>', self.at.isoformat(), shown)

    @property
    def reason_html(self) -> SafeString:
        return format_html('<q class="decision-reason">{}</q>', self.reason)

    @property
    def args_json(self) -> str:
        return json.dumps(self.args, ensure_ascii=False, indent=2) if self.args is not None else ""


# Every kind of record, empty: the chat page's <template id="tpl-decisions">.
DECISION_VARIANTS = ["approved", "edited", "rejected", "rejected-reason", "superseded", "expired"]


@dataclass
class ToolCard:
    """One tool call as the page shows it: its arguments and, once it ran, its result."""

    id: str
    name: str
    args: Any
    state: str = "running"  # running, waiting (for the owner's decision), ok, error, rejected, cancelled, unknown
    output: str = ""
    result_id: int | None = None
    decision: Decision | None = None

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
    """A row of the chat: a message (user or assistant, with its calls) or a tool result without its call; `error`,
    how an answer that did not end well ended, in the reader's language."""

    message: Message
    html: str = ""
    error: str = ""
    cards: list[ToolCard] = field(default_factory=list)


@dataclass
class Version:
    """A branch that a regenerate or an edit replaced, named by its first message; `rows`: its messages (and the
    versions replaced inside it), which _timeline makes into the chat's rows."""

    id: int
    rows: list = field(default_factory=list)


@dataclass
class Versions:
    """What regenerates and edits replaced after one message (`after`; None at the conversation's start), oldest
    first: a row of the chat, just before the live branch goes on (templates/conversations/_versions.html)."""

    after: int | None
    versions: list[Version] = field(default_factory=list)


def _with_versions(history: list[Message]) -> list[Message | Versions]:
    """The live branch, with what was replaced after a message right after that message, as one Versions; each
    version holds its messages, and what was replaced within it, the same way. A superseded message says where
    it belongs (metadata "replaced", services.turns); one that does not is left out. The script arranges the
    history API's messages with the same steps (static/js/chat/versions.js)."""
    rows: list[Message | Versions] = []
    placed: dict[int, list] = {}  # a superseded message's id → the rows of its version
    groups: dict[int | None, Versions] = {}
    for message in history:
        into = rows
        if message.superseded:
            replaced = message.metadata.get("replaced")
            if not replaced:
                continue
            group = groups.get(replaced["after"])
            if group is None:
                group = groups[replaced["after"]] = Versions(after=replaced["after"])
                placed.get(replaced["after"], rows).append(group)
            version = next((item for item in group.versions if item.id == replaced["branch"]), None)
            if version is None:
                version = Version(id=replaced["branch"])
                group.versions.append(version)
            into = placed[message.pk] = version.rows
        into.append(message)
    return rows


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


def _timeline(
    history: list[Message | Versions], confirmations: dict[str, PendingConfirmation]
) -> list[Entry | Versions]:
    """The chat's rows; a call that went to its owner carries the decision, or waits for it."""
    results = {
        message.tool_call_id: message
        for message in history
        if isinstance(message, Message) and message.role == Message.Role.TOOL
    }
    shown: set[str] = set()
    entries: list[Entry | Versions] = []
    for message in history:
        if isinstance(message, Versions):
            versions = [Version(item.id, _timeline(item.rows, confirmations)) for item in message.versions]
            entries.append(Versions(message.after, versions))
        elif message.role == Message.Role.USER:
            entries.append(Entry(message=message))
        elif message.role == Message.Role.ASSISTANT:
            entry = Entry(message=message, html=render_markdown(message.content), error=translate(message.error))
            for call in message.tool_calls or []:
                card = ToolCard(id=str(call.get("id", "")), name=str(call.get("name", "")), args=call.get("args", {}))
                confirmation = confirmations.get(card.id)
                card.decision = Decision.of(confirmation) if confirmation else None
                result = results.get(card.id)
                if result is not None:
                    card.state, card.output, card.result_id = _result_state(result), result.content, result.pk
                    shown.add(card.id)
                elif confirmation is not None and card.decision is None:
                    card.state = "waiting"
                elif card.decision is not None and card.decision.variant not in ("approved", "edited"):
                    # It will not run, though its result is not stored yet.
                    card.state = "rejected" if card.decision.variant.startswith("rejected") else "cancelled"
                entry.cards.append(card)
            entries.append(entry)
        elif message.role == Message.Role.TOOL and message.tool_call_id not in shown:
            # A result whose call is not in view (it should not happen): shown on its own.
            card = ToolCard(id=message.tool_call_id, name=message.tool_name, args={})
            card.state, card.output, card.result_id = _result_state(message), message.content, message.pk
            entries.append(Entry(message=message, cards=[card]))
    return entries


def _uploads() -> dict[str, Any]:
    """What a page that takes files needs: the rules the browser checks first, and the limits its hint says."""
    return {
        "upload_rules": {"maxBytes": MAX_UPLOAD_BYTES, "extensions": UPLOAD_EXTENSIONS},
        "accept": ",".join(UPLOAD_EXTENSIONS),
        "max_mb": MAX_UPLOAD_BYTES // MiB,
    }


def _uuid(value: str) -> uuid.UUID | None:
    try:
        return uuid.UUID(value)
    except ValueError:
        return None


@login_required
def home(request: HttpRequest) -> HttpResponse:
    """Where sign-in lands: the message box that starts a conversation, above the list of those already had (for
    someone with none at all, the box alone). Archived and searched, the list alone."""
    filters = _list_filters(request)
    if not (filters["archived"] or filters["search"] or _has_conversations(request)):
        return _start(request, has_conversations=False)
    conversations = list(selectors.conversations_for(request.user, **filters)[:LIST_LIMIT])
    for conversation in conversations:
        # Where a search found it, the words found marked: its title alone may not say why it is listed.
        match = match_of(conversation)
        conversation.found = pieces(match) if match else []
    archived = request.session.pop(JUST_ARCHIVED, None)
    undo = selectors.conversation_for(request.user, archived) if archived else None
    context = {
        "conversations": conversations,
        "undo": undo if undo and undo.is_archived else None,
        "start_box": not (filters["archived"] or filters["search"]),
        **filters,
        **_uploads(),
    }
    return render(request, "conversations/home.html", context)


@login_required
def chat(request: HttpRequest, pk) -> HttpResponse:
    conversation = _owned(request, pk)
    history = selectors.as_shown(conversation, list(selectors.history_for(conversation)))
    hidden = max(len(history) - HISTORY_LIMIT, 0)
    first = request.session.get(FIRST_MESSAGE) or {}
    if first.get("conversation") == str(conversation.pk):
        del request.session[FIRST_MESSAGE]
    else:
        first = {}
    context = {
        "conversation": conversation,
        "entries": _timeline(_with_versions(history[hidden:]), decisions_for(conversation.pk)),
        "hidden_count": hidden,
        "sidebar": selectors.conversations_for(request.user)[:SIDEBAR_LIMIT],
        **_uploads(),
        "demo_model": settings.LLM_PROVIDER == "local",
        "decision_samples": [Decision(variant) for variant in DECISION_VARIANTS],
        "first_message": first.get("content", ""),
        "first_files": _first_files(conversation, request.user, first.get("attachments", [])),
    }
    return render(request, "conversations/chat.html", context)


def _first_files(conversation: Conversation, user, ids: list[str]) -> list[dict[str, Any]]:
    """The files attached on the start page, which go with the first message: as the composer's chips show them."""
    found = {str(item.pk): item for item in selectors.attachments_owned(conversation, user, ids)}
    return [
        {"id": ref, "name": found[ref].original_name, "kind": found[ref].kind, "size": found[ref].size}
        for ref in ids
        if ref in found
    ]


def _has_conversations(request: HttpRequest) -> bool:
    return selectors.conversations_for(request.user, archived=None).exists()


def _start(request: HttpRequest, *, has_conversations: bool) -> HttpResponse:
    return render(request, "conversations/start.html", {"has_conversations": has_conversations, **_uploads()})


@login_required
@require_http_methods(["GET", "POST"])
def conversation_new(request: HttpRequest) -> HttpResponse:
    """The start page; its first message creates the conversation (or begins the draft that holds the files
    attached), whose chat page then sends it. So no conversation is listed that nobody wrote in."""
    if request.method == "GET":
        return _start(request, has_conversations=_has_conversations(request))
    content = request.POST.get("content", "")
    if not content.strip():
        return redirect("chat-new")
    first = {"content": content, "attachments": []}
    draft_id = _uuid(request.POST.get("draft", ""))
    draft = selectors.draft_for(request.user, draft_id) if draft_id else None
    if draft is not None and services.conversation_begin(conversation=draft):
        conversation = draft
        first["attachments"] = [str(ref) for value in request.POST.getlist("attachments") if (ref := _uuid(value))]
    else:
        if draft_id:
            messages.error(
                request, _("The files attached on the start page could not go with this message: attach them again.")
            )
        conversation = services.conversation_create(owner=request.user)
    request.session[FIRST_MESSAGE] = {"conversation": str(conversation.pk), **first}
    return redirect("chat", pk=conversation.pk)


@login_required
@require_POST
def conversation_draft(request: HttpRequest) -> JsonResponse:
    """The draft that holds the files attached on the start page before its first message: the page's script makes
    it with the first file, and uploads them all to it."""
    draft = services.conversation_draft(owner=request.user)
    upload_url = reverse("conversation-attachments", kwargs={"pk": draft.pk})
    return JsonResponse({"id": str(draft.pk), "upload_url": upload_url}, status=201)


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
    # Said by the list, with Undo (templates/conversations/home.html).
    request.session[JUST_ARCHIVED] = str(conversation.pk)
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
