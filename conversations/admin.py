from django.contrib import admin, messages
from django.db.models import Count
from django.utils.translation import gettext_lazy as _
from django.utils.translation import ngettext

from agentchat.admin import ReadOnlyAdminMixin

from . import services
from .models import Attachment, AuditEvent, Conversation, Message, PendingConfirmation, ToolJob


class MessageInline(ReadOnlyAdminMixin, admin.TabularInline):
    model = Message
    fields = ["created_at", "role", "status", "content", "tool_calls", "tool_name", "outcome"]
    readonly_fields = fields
    extra = 0
    show_change_link = False


@admin.register(Conversation)
class ConversationAdmin(admin.ModelAdmin):
    list_display = ["__str__", "owner", "message_count", "is_archived", "updated_at", "created_at"]
    list_filter = ["is_archived", "created_at"]
    search_fields = ["title", "owner__username", "id"]
    list_select_related = ["owner"]
    readonly_fields = [
        "id",
        "owner",
        "is_archived",
        "archived_at",
        "created_at",
        "updated_at",
        "active_run_id",
        "active_run_since",
        "active_run_heartbeat",
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


@admin.register(PendingConfirmation)
class PendingConfirmationAdmin(ReadOnlyAdminMixin, admin.ModelAdmin):
    list_display = ["tool_name", "status", "conversation", "created_at", "expires_at", "decided_by", "decided_at"]
    list_filter = ["status", "tool_name", "created_at"]
    search_fields = ["tool_name", "tool_call_id", "conversation__title"]
    list_select_related = ["conversation", "decided_by"]


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


@admin.register(AuditEvent)
class AuditEventAdmin(ReadOnlyAdminMixin, admin.ModelAdmin):
    list_display = ["created_at", "kind", "actor", "conversation"]
    list_filter = ["kind", "actor", "created_at"]
    search_fields = ["conversation__id", "actor__username"]
    list_select_related = ["actor", "conversation"]
    date_hierarchy = "created_at"
