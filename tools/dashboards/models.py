"""A catalogue of BI dashboards: what they are, what is wrong with them, and what was done to them."""

from __future__ import annotations

import re

from anyascii import anyascii
from django.conf import settings
from django.db import models
from django.utils import timezone
from django.utils.translation import gettext_lazy as _

MAIN_BRANCH = "main"


def fold(text: str) -> str:
    """Case-folded for search: SQLite's LIKE folds ASCII only, so Cyrillic is folded before it is stored."""
    return " ".join(text.split()).casefold()


def latin(text: str) -> str:
    """A name in Latin letters, spelt so that the usual spellings of one transliteration meet: "Мария", "Mariya" and
    "Maria" are all "maria"; "Алексей", "Aleksey" and "Alexei" "aleksei"; "Дмитрий" and "Dmitry" "dmitri"."""
    spelt = re.sub(r"[^a-z ]", "", anyascii(fold(text)).lower())
    return re.sub(r"i+", "i", spelt.replace("x", "ks").replace("kh", "h").replace("y", "i"))


def owner_search_key(owner: str) -> str:
    """What an owner's name is searched in: the name folded, then in Latin letters."""
    return f"{fold(owner)} {latin(owner)}"


class Tag(models.Model):
    name = models.CharField(_("name"), max_length=50, unique=True, help_text=_("Lower case, e.g. “finance”."))

    class Meta:
        ordering = ["name"]
        verbose_name = _("tag")
        verbose_name_plural = _("tags")

    def __str__(self) -> str:
        return self.name

    def save(self, *args, **kwargs) -> None:
        self.name = fold(self.name)
        super().save(*args, **kwargs)


class Dashboard(models.Model):
    class Status(models.TextChoices):
        DRAFT = "draft", _("draft")
        PUBLISHED = "published", _("published")
        DEPRECATED = "deprecated", _("deprecated")

    title = models.CharField(_("title"), max_length=200)
    description = models.TextField(_("description"), blank=True)
    # A person's name: owners are people of the BI team, who need not be users of AgentChat.
    owner = models.CharField(_("owner"), max_length=100)
    status = models.CharField(_("status"), max_length=16, choices=Status.choices, default=Status.DRAFT)
    tags = models.ManyToManyField(Tag, blank=True, related_name="dashboards", verbose_name=_("tags"))
    datasets = models.JSONField(_("datasets"), default=list, blank=True, help_text=_("Names of the datasets it reads."))
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)
    # Derived from title, description and owner on save, for case-insensitive search in any alphabet.
    search_text = models.TextField(editable=False, blank=True)
    # The owner's name folded, then in Latin letters (`latin`), so that it is found in either alphabet; a text, as
    # a transliteration can be several times as long as the name ("Щ" is "Shch").
    owner_key = models.TextField(editable=False, blank=True)

    class Meta:
        ordering = ["id"]
        indexes = [models.Index(fields=["status"], name="dashboard_status")]
        verbose_name = _("dashboard")
        verbose_name_plural = _("dashboards")
        permissions = [
            ("create_branch", _("Can create a branch of a dashboard")),
            ("deploy_dashboard", _("Can deploy a dashboard")),
            ("execute_migration", _("Can execute a dashboard's migration")),
            ("commit_changes", _("Can commit a dashboard's changes")),
        ]

    def __str__(self) -> str:
        return f"#{self.pk} {self.title}"

    def save(self, *args, **kwargs) -> None:
        self.fill_search_fields()
        if (fields := kwargs.get("update_fields")) is not None:
            kwargs["update_fields"] = {*fields, "search_text", "owner_key"}
        super().save(*args, **kwargs)

    def fill_search_fields(self) -> None:
        """What search reads; `save` calls it, and whoever makes rows without `save` (bulk_create) must."""
        self.search_text = fold(f"{self.title}\n{self.description}\n{self.owner}")
        self.owner_key = owner_search_key(self.owner)


class ValidationProblem(models.Model):
    class Severity(models.TextChoices):
        ERROR = "error", _("error")
        WARNING = "warning", _("warning")
        INFO = "info", _("info")

    dashboard = models.ForeignKey(Dashboard, on_delete=models.CASCADE, related_name="problems")
    code = models.SlugField(_("code"), max_length=64, help_text=_("A stable machine name, e.g. “missing_dataset”."))
    severity = models.CharField(_("severity"), max_length=8, choices=Severity.choices)
    message = models.TextField(_("message"))
    hint = models.TextField(_("what to do"), blank=True)
    detected_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["dashboard", "id"]
        indexes = [models.Index(fields=["dashboard", "severity"], name="problem_dashboard_severity")]
        verbose_name = _("validation problem")
        verbose_name_plural = _("validation problems")

    def __str__(self) -> str:
        return f"{self.severity}: {self.code}"


class Branch(models.Model):
    dashboard = models.ForeignKey(Dashboard, on_delete=models.CASCADE, related_name="branches")
    name = models.CharField(_("name"), max_length=100)
    base = models.CharField(_("branched from"), max_length=100, default=MAIN_BRANCH)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["dashboard", "created_at", "id"]
        constraints = [models.UniqueConstraint(fields=["dashboard", "name"], name="branch_name_unique")]
        verbose_name = _("branch")
        verbose_name_plural = _("branches")

    def __str__(self) -> str:
        return f"{self.name} (dashboard {self.dashboard_id})"


class Commit(models.Model):
    dashboard = models.ForeignKey(Dashboard, on_delete=models.CASCADE, related_name="commits")
    sha = models.CharField(_("commit id"), max_length=40, unique=True)
    branch = models.CharField(_("branch"), max_length=100, default=MAIN_BRANCH)
    message = models.TextField(_("message"))
    author = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    created_at = models.DateTimeField(default=timezone.now)
    changes = models.JSONField(_("changes"), default=list, blank=True, help_text=_("What the commit changed."))

    class Meta:
        ordering = ["dashboard", "-created_at", "-id"]
        indexes = [models.Index(fields=["dashboard", "branch", "-created_at"], name="commit_dashboard_branch")]
        verbose_name = _("commit")
        verbose_name_plural = _("commits")

    def __str__(self) -> str:
        return f"{self.sha[:10]} {self.message[:60]}"


class Change(models.Model):
    """An edit made in the BI tool; uncommitted while `commit` is empty."""

    dashboard = models.ForeignKey(Dashboard, on_delete=models.CASCADE, related_name="changes")
    branch = models.CharField(_("branch"), max_length=100, default=MAIN_BRANCH)
    summary = models.CharField(_("summary"), max_length=300)
    author = models.CharField(_("author"), max_length=100, help_text=_("Who made the edit in the BI tool."))
    created_at = models.DateTimeField(default=timezone.now)
    commit = models.ForeignKey(
        Commit, on_delete=models.SET_NULL, null=True, blank=True, related_name="change_rows", verbose_name=_("commit")
    )

    class Meta:
        ordering = ["dashboard", "created_at", "id"]
        indexes = [models.Index(fields=["dashboard", "branch", "commit"], name="change_uncommitted")]
        verbose_name = _("change")
        verbose_name_plural = _("changes")

    def __str__(self) -> str:
        return self.summary


class Migration(models.Model):
    """A change to a dashboard's data model (columns, datasets, filters) that must be run to take effect."""

    class Status(models.TextChoices):
        PENDING = "pending", _("pending")
        EXECUTED = "executed", _("executed")

    dashboard = models.ForeignKey(Dashboard, on_delete=models.CASCADE, related_name="migrations")
    name = models.CharField(_("name"), max_length=100)
    description = models.TextField(_("description"), blank=True)
    status = models.CharField(_("status"), max_length=16, choices=Status.choices, default=Status.PENDING)
    created_at = models.DateTimeField(default=timezone.now)
    executed_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    executed_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["dashboard", "name", "id"]
        constraints = [models.UniqueConstraint(fields=["dashboard", "name"], name="migration_name_unique")]
        indexes = [models.Index(fields=["dashboard", "status"], name="migration_dashboard_status")]
        verbose_name = _("migration")
        verbose_name_plural = _("migrations")

    def __str__(self) -> str:
        return f"{self.name} ({self.status})"


class Deployment(models.Model):
    class Environment(models.TextChoices):
        STAGING = "staging", _("staging")
        PRODUCTION = "production", _("production")

    class Status(models.TextChoices):
        SUCCEEDED = "succeeded", _("succeeded")
        FAILED = "failed", _("failed")
        ROLLED_BACK = "rolled_back", _("rolled back")

    dashboard = models.ForeignKey(Dashboard, on_delete=models.CASCADE, related_name="deployments")
    environment = models.CharField(_("environment"), max_length=16, choices=Environment.choices)
    status = models.CharField(_("status"), max_length=16, choices=Status.choices, default=Status.SUCCEEDED)
    commit = models.ForeignKey(
        Commit, on_delete=models.SET_NULL, null=True, blank=True, related_name="deployments", verbose_name=_("commit")
    )
    deployed_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    deployed_at = models.DateTimeField(default=timezone.now)
    notes = models.TextField(_("notes"), blank=True)

    class Meta:
        ordering = ["dashboard", "-deployed_at", "-id"]
        indexes = [models.Index(fields=["dashboard", "environment", "-deployed_at"], name="deployment_latest")]
        verbose_name = _("deployment")
        verbose_name_plural = _("deployments")

    def __str__(self) -> str:
        return f"dashboard {self.dashboard_id} → {self.environment} ({self.status})"
