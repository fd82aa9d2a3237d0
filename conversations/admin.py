"""The admin (docs/pages.md#admin): what the product wrote, read as it happened; only a conversation's title and its
archive are changed here."""

from __future__ import annotations

import json
from typing import Any

from django.contrib import admin, messages
from django.db.models import Count, Q, QuerySet
from django.forms.models import BaseInlineFormSet
from django.templatetags.static import static
from django.urls import reverse
from django.utils import timezone
from django.utils.formats import date_format
from django.utils.html import format_html, format_html_join
from django.utils.text import Truncator
from django.utils.translation import gettext_lazy as _
from django.utils.translation import ngettext

from agentchat.admin import ReadOnlyAdminMixin
from agentchat.agent.calls import Outcome

from . import services
from .models import Attachment, AuditEvent, Conversation, Message, PendingConfirmation, TokenUsage, ToolJob

# A conversation's page lists its newest messages only; the messages list has them all.
LATEST_MESSAGES = 20
TEXT_CHARS = 120
JSON_CHARS = 160


def _json(value: Any) -> str:
    return Truncator(json.dumps(value, ensure_ascii=False, sort_keys=True)).chars(JSON_CHARS)


def _when(moment) -> str:
    return date_format(timezone.localtime(moment), "SHORT_DATETIME_FORMAT")


class MessageReadouts:
    """A message at a glance: its text cut short, the calls it asks for, and how a tool call ended."""

    @admin.display(description=_("text"))
    def excerpt(self, message: Message) -> str:
        return Truncator(message.content).chars(TEXT_CHARS)

    @admin.display(description=_("calls"))
    def calls(self, message: Message) -> str:
        return ", ".join(str(call.get("name", "")) for call in message.tool_calls or [])

    @admin.display(description=_("tool outcome"))
    def tool_outcome(self, message: Message) -> str:
        if message.role != Message.Role.TOOL:
            return ""
        outcome = message.outcome or Outcome.DONE
        done = outcome == Outcome.DONE
        icon = static(f"admin/img/icon-{'yes' if done else 'no'}.svg")
        return format_html('<img src="{}" alt=""> {} · {}', icon, message.tool_name, outcome)

    @admin.display(description=_("replaced"))
    def replaced(self, message: Message) -> str:
        """Said only of a message a regenerate or an edit replaced: a mark on every other one would say nothing."""
        return _("replaced by a later version") if message.superseded else ""


class LatestMessages(BaseInlineFormSet):
    """Only the conversation's newest messages, oldest of them first: the page stays short however long it is."""

    def get_queryset(self) -> QuerySet[Message]:
        if not hasattr(self, "_latest"):
            messages = super().get_queryset()
            newest = messages.order_by("-created_at", "-id").values_list("pk", flat=True)[:LATEST_MESSAGES]
            self._latest = messages.filter(pk__in=list(newest))
        return self._latest


class MessageInline(MessageReadouts, ReadOnlyAdminMixin, admin.TabularInline):
    model = Message
    formset = LatestMessages
    fields = ["created_at", "role", "status", "excerpt", "calls", "tool_outcome", "replaced", "usage"]
    readonly_fields = fields
    extra = 0
    show_change_link = True
    verbose_name_plural = _("latest messages")


@admin.register(Conversation)
class ConversationAdmin(admin.ModelAdmin):
    list_display = ["__str__", "owner", "message_count", "is_archived", "updated_at", "created_at"]
    list_filter = ["is_archived", "is_draft", "created_at"]
    search_fields = ["title", "owner__username", "id"]
    list_select_related = ["owner"]
    readonly_fields = [
        "id",
        "owner",
        "is_archived",
        "archived_at",
        "is_draft",
        "created_at",
        "updated_at",
        "active_run_id",
        "active_run_since",
        "active_run_heartbeat",
        "all_messages",
    ]
    fields = ["title", *readonly_fields]
    inlines = [MessageInline]
    actions = ["archive", "restore"]
    date_hierarchy = "created_at"

    def get_queryset(self, request):
        return super().get_queryset(request).annotate(message_total=Count("messages"))

    @admin.display(description=_("messages"), ordering="message_total")
    def message_count(self, obj):
        return obj.message_total

    @admin.display(description=_("all messages"))
    def all_messages(self, conversation: Conversation) -> str:
        total = conversation.messages.count()
        words = ngettext("%(total)d message, oldest first", "%(total)d messages, oldest first", total) % {
            "total": total
        }
        url = f"{reverse('admin:conversations_message_changelist')}?conversation__id__exact={conversation.pk}"
        return format_html('<a href="{}">{}</a>', url, words)

    def has_add_permission(self, request):
        return False

    def has_delete_permission(self, request, obj=None):
        return False

    def save_model(self, request, obj, form, change):
        if "title" in form.changed_data:
            services.conversation_rename(conversation=obj, title=obj.title, actor=request.user)

    @admin.action(description=_("Archive selected conversations"), permissions=["change"])
    def archive(self, request, queryset):
        for conversation in queryset:
            services.conversation_archive(conversation=conversation, actor=request.user)
        self.message_user(
            request,
            ngettext("%d conversation archived.", "%d conversations archived.", len(queryset)) % len(queryset),
            messages.SUCCESS,
        )

    @admin.action(description=_("Restore selected conversations"), permissions=["change"])
    def restore(self, request, queryset):
        for conversation in queryset:
            services.conversation_restore(conversation=conversation, actor=request.user)
        self.message_user(
            request,
            ngettext("%d conversation restored.", "%d conversations restored.", len(queryset)) % len(queryset),
            messages.SUCCESS,
        )


@admin.register(Message)
class MessageAdmin(MessageReadouts, ReadOnlyAdminMixin, admin.ModelAdmin):
    list_display = ["created_at", "conversation", "role", "status", "excerpt", "calls", "tool_outcome", "replaced"]
    list_filter = ["role", "status", "superseded", "created_at"]
    search_fields = ["conversation__id", "tool_name", "tool_call_id"]
    list_select_related = ["conversation"]
    list_per_page = 50


class ConfirmationStatus(admin.SimpleListFilter):
    """By what became of the call; those waiting for a decision until another choice is made."""

    title = _("status")
    parameter_name = "status"
    default = "waiting"

    def lookups(self, request, model_admin):
        return [
            ("waiting", _("Waiting for a decision")),
            (PendingConfirmation.Status.APPROVED, _("Approved")),
            (PendingConfirmation.Status.EDITED, _("Edited")),
            (PendingConfirmation.Status.REJECTED, _("Rejected")),
            (PendingConfirmation.Status.SUPERSEDED, _("Replaced by a new message")),
            (PendingConfirmation.Status.EXPIRED, _("Expired")),
            ("all", _("All")),
        ]

    def choices(self, changelist):
        chosen = self.value() or self.default
        for value, label in self.lookup_choices:
            query = changelist.get_query_string({self.parameter_name: value})
            yield {"selected": chosen == value, "query_string": query, "display": label}

    def queryset(self, request, queryset):
        chosen, now = self.value() or self.default, timezone.now()
        pending = Q(status=PendingConfirmation.Status.PENDING)
        if chosen == "waiting":
            return queryset.filter(pending, expires_at__gt=now)
        if chosen == PendingConfirmation.Status.EXPIRED:
            # One nobody decided in time stays pending until a new message settles it.
            return queryset.filter(Q(status=chosen) | (pending & Q(expires_at__lte=now)))
        return queryset if chosen == "all" else queryset.filter(status=chosen)


@admin.register(PendingConfirmation)
class PendingConfirmationAdmin(ReadOnlyAdminMixin, admin.ModelAdmin):
    list_display = ["tool_name", "decision", "arguments", "reason", "conversation", "created_at"]
    list_filter = [ConfirmationStatus, "tool_name", "created_at"]
    search_fields = ["tool_name", "tool_call_id", "conversation__title", "decided_by__username"]
    list_select_related = ["conversation", "decided_by"]

    @admin.display(description=_("decision"))
    def decision(self, confirmation: PendingConfirmation) -> str:
        Status = PendingConfirmation.Status
        if confirmation.status == Status.PENDING:
            if confirmation.expires_at <= timezone.now():
                return _("Expired at %(when)s") % {"when": _when(confirmation.expires_at)}
            return _("Waiting until %(when)s") % {"when": _when(confirmation.expires_at)}
        if confirmation.status == Status.SUPERSEDED:
            return _("Replaced by a new message")
        if confirmation.status == Status.EXPIRED:
            return _("Expired")
        words = {
            Status.APPROVED: _("Approved by %(who)s at %(when)s"),
            Status.EDITED: _("Edited by %(who)s at %(when)s"),
            Status.REJECTED: _("Rejected by %(who)s at %(when)s"),
        }[confirmation.status]
        who = confirmation.decided_by.get_username() if confirmation.decided_by else _("someone")
        return words % {"who": who, "when": _when(confirmation.decided_at) if confirmation.decided_at else "?"}

    @admin.display(description=_("arguments"))
    def arguments(self, confirmation: PendingConfirmation) -> str:
        """What the call asked for, and what it ran with when an edit changed them."""
        if confirmation.edited_args is None:
            return _json(confirmation.args)
        return _("%(asked)s, edited to %(edited)s") % {
            "asked": _json(confirmation.args),
            "edited": _json(confirmation.edited_args),
        }


@admin.register(ToolJob)
class ToolJobAdmin(ReadOnlyAdminMixin, admin.ModelAdmin):
    list_display = ["tool_name", "status", "attempt", "user", "conversation", "created_at", "finished_at"]
    list_filter = ["status", "tool_name", "created_at"]
    search_fields = ["tool_name", "tool_call_id", "conversation__id", "user__username"]
    list_select_related = ["user", "conversation"]


@admin.register(Attachment)
class AttachmentAdmin(ReadOnlyAdminMixin, admin.ModelAdmin):
    list_display = ["original_name", "kind", "size", "parse_status", "owner", "conversation", "created_at"]
    list_filter = ["kind", "parse_status", "created_at"]
    search_fields = ["original_name", "sha256", "owner__username"]
    list_select_related = ["owner", "conversation"]
    exclude = ["text", "index"]


@admin.register(TokenUsage)
class TokenUsageAdmin(ReadOnlyAdminMixin, admin.ModelAdmin):
    list_display = ["day", "user", "prompt_tokens", "completion_tokens", "total", "answers"]
    list_filter = ["day", "user"]
    search_fields = ["user__username"]
    list_select_related = ["user"]
    date_hierarchy = "day"

    @admin.display(description=_("total tokens"))
    def total(self, obj):
        return obj.total


@admin.register(AuditEvent)
class AuditEventAdmin(ReadOnlyAdminMixin, admin.ModelAdmin):
    list_display = ["created_at", "kind", "actor", "conversation", "what"]
    list_filter = ["kind", "actor", "created_at"]
    search_fields = ["conversation__id", "actor__username"]
    list_select_related = ["actor", "conversation"]
    date_hierarchy = "created_at"

    @admin.display(description=_("what happened"))
    def what(self, event: AuditEvent) -> str:
        """The tool, the arguments it was asked, run or edited with, and the rest of what was recorded: a decision
        and its reason, an outcome, a new title, a file… The ids are left to the event's own page."""
        data = event.data
        arguments = " → ".join(_json(data[key]) for key in ("args", "edited_args") if data.get(key) is not None)
        rest = " · ".join(
            f"{key}: {value if isinstance(value, str) else _json(value)}"
            # In the order of their names: PostgreSQL keeps no order of a JSON object's keys.
            for key, value in sorted(data.items())
            if key not in ("tool", "args", "edited_args") and not key.endswith("_id") and value not in ("", None)
        )
        parts = [format_html("<code>{}</code>", data["tool"]) if data.get("tool") else "", arguments, rest]
        return format_html_join(" · ", "{}", ([part] for part in parts if part))
