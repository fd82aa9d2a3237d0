from __future__ import annotations

from django.contrib import admin
from django.utils.translation import gettext_lazy as _

from agentchat.admin import ReadOnlyAdminMixin

from . import selectors
from .models import Branch, Change, Commit, Dashboard, Deployment, Migration, Tag, ValidationProblem


class ProblemInline(admin.TabularInline):
    model = ValidationProblem
    fields = ["severity", "code", "message", "hint"]
    extra = 0


class MigrationInline(admin.TabularInline):
    model = Migration
    fields = ["name", "description", "status", "executed_by", "executed_at"]
    readonly_fields = ["executed_by", "executed_at"]
    extra = 0


class ChangeInline(admin.TabularInline):
    model = Change
    fields = ["branch", "summary", "author", "commit"]
    readonly_fields = ["commit"]
    extra = 0


@admin.register(Dashboard)
class DashboardAdmin(admin.ModelAdmin):
    list_display = ["id", "title", "owner", "status", "errors", "warnings", "updated_at"]
    list_display_links = ["id", "title"]
    list_filter = ["status", "problems__severity", "tags"]
    search_fields = ["title", "owner", "tags__name"]
    filter_horizontal = ["tags"]
    readonly_fields = ["created_at", "updated_at"]
    fields = ["title", "description", "owner", "status", "tags", "datasets", "created_at", "updated_at"]
    inlines = [ProblemInline, MigrationInline, ChangeInline]

    def get_queryset(self, request):
        return selectors.with_problem_counts(super().get_queryset(request))

    @admin.display(description=_("errors"), ordering="errors")
    def errors(self, obj):
        return obj.errors

    @admin.display(description=_("warnings"), ordering="warnings")
    def warnings(self, obj):
        return obj.warnings


@admin.register(Tag)
class TagAdmin(admin.ModelAdmin):
    search_fields = ["name"]


@admin.register(ValidationProblem)
class ValidationProblemAdmin(admin.ModelAdmin):
    list_display = ["dashboard", "severity", "code", "message", "detected_at"]
    list_filter = ["severity", "code"]
    search_fields = ["code", "message", "dashboard__title"]
    list_select_related = ["dashboard"]
    raw_id_fields = ["dashboard"]


@admin.register(Branch)
class BranchAdmin(admin.ModelAdmin):
    list_display = ["name", "dashboard", "base", "created_by", "created_at"]
    list_filter = ["created_at"]
    search_fields = ["name", "dashboard__title", "created_by__username"]
    list_select_related = ["dashboard", "created_by"]
    raw_id_fields = ["dashboard", "created_by"]


@admin.register(Migration)
class MigrationAdmin(admin.ModelAdmin):
    list_display = ["name", "dashboard", "status", "executed_by", "executed_at", "created_at"]
    list_filter = ["status", "executed_at"]
    search_fields = ["name", "description", "dashboard__title"]
    list_select_related = ["dashboard", "executed_by"]
    raw_id_fields = ["dashboard", "executed_by"]


@admin.register(Change)
class ChangeAdmin(admin.ModelAdmin):
    list_display = ["summary", "dashboard", "branch", "author", "commit", "created_at"]
    list_filter = [("commit", admin.EmptyFieldListFilter), "branch"]
    search_fields = ["summary", "author", "dashboard__title"]
    list_select_related = ["dashboard", "commit"]
    raw_id_fields = ["dashboard", "commit"]


@admin.register(Commit)
class CommitAdmin(ReadOnlyAdminMixin, admin.ModelAdmin):
    list_display = ["sha", "dashboard", "branch", "message", "author", "created_at"]
    list_filter = ["branch", "created_at"]
    search_fields = ["sha", "message", "dashboard__title", "author__username"]
    list_select_related = ["dashboard", "author"]


@admin.register(Deployment)
class DeploymentAdmin(ReadOnlyAdminMixin, admin.ModelAdmin):
    list_display = ["dashboard", "environment", "status", "deployed_by", "deployed_at"]
    list_filter = ["environment", "status", "deployed_at"]
    search_fields = ["dashboard__title", "deployed_by__username"]
    list_select_related = ["dashboard", "deployed_by", "commit"]
    date_hierarchy = "deployed_at"
