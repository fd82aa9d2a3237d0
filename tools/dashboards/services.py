"""Writes to the catalogue: what the dashboard tools do, each recording who did it."""

from __future__ import annotations

import secrets

from django.db import IntegrityError, transaction
from django.utils import timezone

from . import selectors
from .exceptions import BranchError, DeploymentBlocked, NoPendingMigration, NothingToCommit
from .models import MAIN_BRANCH, Branch, Commit, Dashboard, Deployment, Migration

MAX_NAME_SUFFIX = 100


def _default_branch_name(dashboard: Dashboard, actor) -> str:
    prefix = getattr(actor, "username", "") or "agent"
    stem = f"{prefix}/dashboard-{dashboard.pk}"
    taken = set(dashboard.branches.filter(name__startswith=stem).values_list("name", flat=True))
    for number in range(1, MAX_NAME_SUFFIX + 1):
        name = stem if number == 1 else f"{stem}-{number}"
        if name not in taken:
            return name
    raise BranchError(f"Dashboard {dashboard.pk} has too many branches named {stem}-…; give the branch a name.")


def branch_create(*, dashboard: Dashboard, actor, name: str | None = None, base: str = MAIN_BRANCH) -> Branch:
    selectors.branch_check(dashboard, base)
    name = name or _default_branch_name(dashboard, actor)
    if name == MAIN_BRANCH or dashboard.branches.filter(name=name).exists():
        raise BranchError(f"Dashboard {dashboard.pk} has a branch named {name!r} already; choose another name.")
    try:
        with transaction.atomic():
            return Branch.objects.create(dashboard=dashboard, name=name, base=base, created_by=actor)
    except IntegrityError:
        # Someone made it between the check and the insert.
        raise BranchError(
            f"Dashboard {dashboard.pk} has a branch named {name!r} already; choose another name."
        ) from None


@transaction.atomic
def dashboard_deploy(*, dashboard: Dashboard, environment: str, actor) -> Deployment:
    """Deploy the dashboard's latest commit on main. Production refuses a dashboard with error-level problems."""
    problems = selectors.problems_of(dashboard)
    errors = [problem for problem in problems if problem.severity == problem.Severity.ERROR]
    if environment == Deployment.Environment.PRODUCTION and errors:
        codes = ", ".join(problem.code for problem in errors)
        raise DeploymentBlocked(
            f"Dashboard {dashboard.pk} was not deployed: production does not take a dashboard with error-level "
            f"validation problems ({len(errors)}: {codes}). Fix them first (dashboard_health says how), "
            f"or deploy to staging."
        )
    notes = []
    if warnings := sum(problem.severity == problem.Severity.WARNING for problem in problems):
        notes.append(f"validation problems at warning level: {warnings}")
    if uncommitted := selectors.uncommitted_changes(dashboard, MAIN_BRANCH).count():
        notes.append(f"uncommitted changes on main, not part of this deployment: {uncommitted}")
    if pending := selectors.pending_migrations(dashboard).count():
        notes.append(f"pending migrations, not executed: {pending}")
    return Deployment.objects.create(
        dashboard=dashboard,
        environment=environment,
        status=Deployment.Status.SUCCEEDED,
        commit=dashboard.commits.filter(branch=MAIN_BRANCH).order_by("-created_at", "-id").first(),
        deployed_by=actor,
        notes="; ".join(notes),
    )


def migration_execute(*, dashboard: Dashboard, actor, migration_id: int | None = None) -> Migration:
    """Run one pending migration: the one named, or else the dashboard's first pending one."""
    if migration_id is None:
        migration = selectors.pending_migrations(dashboard).first()
        if migration is None:
            raise NoPendingMigration(f"Dashboard {dashboard.pk} has no pending migration; there is nothing to execute.")
    else:
        migration = dashboard.migrations.filter(pk=migration_id).first()
        if migration is None:
            raise NoPendingMigration(f"Dashboard {dashboard.pk} has no migration with id {migration_id}.")
    # One conditional UPDATE: of two simultaneous approvals, only one executes it.
    executed = Migration.objects.filter(pk=migration.pk, status=Migration.Status.PENDING).update(
        status=Migration.Status.EXECUTED, executed_by=actor, executed_at=timezone.now()
    )
    if not executed:
        raise NoPendingMigration(f"Migration {migration.name!r} of dashboard {dashboard.pk} was executed already.")
    migration.refresh_from_db()
    return migration


@transaction.atomic
def changes_commit(*, dashboard: Dashboard, actor, branch: str = MAIN_BRANCH, message: str = "") -> Commit:
    selectors.branch_check(dashboard, branch)
    changes = list(selectors.uncommitted_changes(dashboard, branch).select_for_update().order_by("created_at", "id"))
    if not changes:
        raise NothingToCommit(f"Nothing to commit: dashboard {dashboard.pk} has no uncommitted changes on {branch}.")
    summaries = [change.summary for change in changes]
    commit = Commit.objects.create(
        dashboard=dashboard,
        sha=secrets.token_hex(20),
        branch=branch,
        message=message.strip() or f"Update dashboard {dashboard.pk}: " + "; ".join(summaries)[:200],
        author=actor,
        changes=summaries,
    )
    dashboard.changes.filter(pk__in=[change.pk for change in changes]).update(commit=commit)
    return commit
