"""Reads of the catalogue."""

from __future__ import annotations

import re

import snowballstemmer
from django.db.models import Case, Count, IntegerField, Q, QuerySet, Value, When

from .exceptions import BranchError, DashboardNotFound, TagError
from .models import MAIN_BRANCH, Change, Dashboard, Migration, Tag, ValidationProblem, fold, latin

Severity = ValidationProblem.Severity
CYRILLIC = re.compile(r"[а-яё]")

SEVERITY_RANK = Case(
    When(severity=Severity.ERROR, then=Value(0)),
    When(severity=Severity.WARNING, then=Value(1)),
    default=Value(2),
    output_field=IntegerField(),
)


# The count with_problem_counts makes of each severity's problems.
COUNTS = {Severity.ERROR: "errors", Severity.WARNING: "warnings", Severity.INFO: "infos"}


def dashboard_get(dashboard_id: int) -> Dashboard:
    dashboard = Dashboard.objects.filter(pk=dashboard_id).first()
    if dashboard is None:
        raise DashboardNotFound(f"There is no dashboard with id {dashboard_id}; search_dashboards finds the right id.")
    return dashboard


def with_problem_counts(queryset: QuerySet[Dashboard]) -> QuerySet[Dashboard]:
    # distinct: a later filter across a relation (the admin's) must not multiply the counts.
    return queryset.annotate(
        **{
            counted: Count("problems", filter=Q(problems__severity=severity), distinct=True)
            for severity, counted in COUNTS.items()
        },
        problem_total=Count("problems", distinct=True),
    )


def stems(text: str) -> list[tuple[str, str]]:
    """Each word of `text`, folded, with its stem (Snowball's, Russian for a Cyrillic word, English otherwise)."""
    russian, english = snowballstemmer.stemmer("russian"), snowballstemmer.stemmer("english")
    return [(word, (russian if CYRILLIC.search(word) else english).stemWord(word)) for word in fold(text).split()]


def dashboards_search(
    *,
    query: str = "",
    owner: str = "",
    tag: str = "",
    status: str | None = None,
    has_validation_problems: bool | None = None,
    severity: str | None = None,
    worst_first: bool = False,
) -> QuerySet[Dashboard]:
    """Dashboards matching every given filter, with their problem counts: oldest id first, or, `worst_first`, those
    with the most errors first, then the most warnings, then the most notes.

    Each word of `query` must appear in the title, description or owner, or in one of the tags, and each word of
    `owner` in the owner's name; a word matches in any of its forms ("логистику" finds "Логистика", "Ирине
    Смирновой" finds "Ирина Смирнова"), and a name in either alphabet ("Maria" finds "Мария Иванова", "Оливия"
    "Olivia Chen"). A `severity` counts only the problems of that severity: the dashboards with at least one, or,
    where `has_validation_problems` is False, with none.
    """
    tagged = Dashboard.tags.through.objects
    # Filters by subquery, not by join, so that the problem counts are not multiplied by matching tags.
    dashboards = Dashboard.objects.all()
    for word, stem in stems(query):
        matches = (
            Q(search_text__contains=stem)
            | Q(pk__in=tagged.filter(tag__name__contains=stem).values("dashboard"))
            | _named(stem)
        )
        if word.isdigit():
            matches |= Q(pk=int(word))
        dashboards = dashboards.filter(matches)
    for _word, stem in stems(owner):
        dashboards = dashboards.filter(Q(owner_key__contains=stem) | _named(stem))
    if tag.strip():
        dashboards = dashboards.filter(pk__in=tagged.filter(tag__name=fold(tag)).values("dashboard"))
    if status:
        dashboards = dashboards.filter(status=status)
    dashboards = with_problem_counts(dashboards)
    counted = COUNTS[severity] if severity else "problem_total"
    if has_validation_problems is False:
        dashboards = dashboards.filter(**{counted: 0})
    elif has_validation_problems or severity:
        dashboards = dashboards.filter(**{f"{counted}__gt": 0})
    order = ("-errors", "-warnings", "-infos", "id") if worst_first else ("id",)
    return dashboards.prefetch_related("tags").order_by(*order)


def _named(stem: str) -> Q:
    """Dashboards whose owner's name, in Latin letters, holds the stem's."""
    spelt = latin(stem).strip()
    return Q(owner_key__contains=spelt) if spelt else Q(pk__in=[])


def tag_check(name: str) -> None:
    """A tag of the catalogue; anything else is an error naming the tags there are (a model that guessed one,
    or put it in the request's own language, learns which to use)."""
    if Tag.objects.filter(name=fold(name)).exists():
        return
    raise TagError(f"There is no tag {name!r}; the tags are: {', '.join(Tag.objects.values_list('name', flat=True))}.")


def problems_of(dashboard: Dashboard) -> list[ValidationProblem]:
    """Most severe first."""
    return list(dashboard.problems.annotate(rank=SEVERITY_RANK).order_by("rank", "id"))


def pending_migrations(dashboard: Dashboard) -> QuerySet[Migration]:
    return dashboard.migrations.filter(status=Migration.Status.PENDING).order_by("name", "id")


def uncommitted_changes(dashboard: Dashboard, branch: str | None = None) -> QuerySet[Change]:
    changes = dashboard.changes.filter(commit__isnull=True)
    return changes.filter(branch=branch) if branch is not None else changes


def branch_check(dashboard: Dashboard, name: str) -> None:
    """`main` or one of the dashboard's branches; anything else is an error naming the branches there are."""
    if name == MAIN_BRANCH or dashboard.branches.filter(name=name).exists():
        return
    known = [MAIN_BRANCH, *dashboard.branches.values_list("name", flat=True)]
    raise BranchError(f"Dashboard {dashboard.pk} has no branch {name!r}; its branches are: {', '.join(known)}.")
