"""The dashboard tools the agent calls. Docstrings and field descriptions are what the model reads.

Each tool's examples, typical requests in English and Russian, are what the small local model is shown (the ones
most like the request); single-digit ids, because a longer one, say 31, got copied onto a request for dashboard 3.

Permissions, one per tool (app label `dashboards`): reading needs `view_dashboard`; each tool that changes
something needs the permission named like the tool, and the dangerous three wait for the user's approval. The
small local model may call one of those three only when the request says its action in words (`action_words`:
English, then Russian stems); a question about the same dashboard goes to dashboard_health.
"""

from __future__ import annotations

import re
from datetime import datetime
from typing import Any, Literal

from pydantic import Field, field_validator

from tools.registry import ToolArgs, ToolContext, registry

from . import selectors, services, summaries
from .models import MAIN_BRANCH, Dashboard, Deployment, ValidationProblem
from .permissions import COMMIT, CREATE_BRANCH, DEPLOY, EXECUTE_MIGRATION, VIEW

ENVIRONMENT_ALIASES = {"prod": "production", "live": "production", "stage": "staging", "stg": "staging"}
BRANCH_NAME = re.compile(r"^(?!.*\.\.)(?!.*//)\w(?:[\w./-]{0,98}\w)?$")
LIST_LIMIT = 10


# --- arguments --------------------------------------------------------------------------------


class SearchArgs(ToolArgs):
    query: str = Field("", max_length=200, description="Words to look for in titles, descriptions, owners and tags.")
    owner: str = Field("", max_length=100, description="Part of the owner's name, e.g. 'Ivanova'.")
    tag: str = Field("", max_length=50, description="One tag, exactly, e.g. 'finance'.")
    status: Literal["draft", "published", "deprecated"] | None = Field(None, description="Only this status.")
    has_validation_problems: bool | None = Field(
        None, description="true: only dashboards with validation problems; false: only those without."
    )
    severity: Literal["error", "warning", "info"] | None = Field(
        None,
        description="Count only the problems of this severity: dashboards with at least one, or, with "
        "has_validation_problems=false, with none.",
    )
    order: Literal["id", "worst"] = Field(
        "id", description="id: oldest first; worst: the most errors first, then the most warnings, then notes."
    )
    page: int = Field(1, ge=1, description="Page number, from 1.")
    page_size: int = Field(10, ge=1, le=50, description="Dashboards per page, at most 50.")


class DashboardArgs(ToolArgs):
    dashboard_id: int = Field(ge=1, description="The dashboard's id, e.g. 42.")


class BranchArgs(DashboardArgs):
    name: str | None = Field(
        None, max_length=100, description="Branch name, e.g. 'fix-revenue-filter'. Leave out for a generated name."
    )
    base: str = Field(MAIN_BRANCH, max_length=100, description="The branch to start from.")

    @field_validator("name")
    @classmethod
    def _branch_name(cls, name: str | None) -> str | None:
        if name is None or not name.strip():
            return None
        name = name.strip()
        if not BRANCH_NAME.match(name) or name.endswith(".lock"):
            raise ValueError("a branch name is letters, digits, '.', '_', '-' and '/', without spaces or '..'")
        return name


class DeployArgs(DashboardArgs):
    environment: Literal["staging", "production"] = Field(description="Where to deploy.")

    @field_validator("environment", mode="before")
    @classmethod
    def _environment(cls, value: Any) -> Any:
        if isinstance(value, str):
            value = value.strip().lower()
            value = ENVIRONMENT_ALIASES.get(value, value)
            if value not in Deployment.Environment.values:
                raise ValueError(f"unknown environment {value!r}; use one of: {', '.join(Deployment.Environment)}")
        return value


class MigrationArgs(DashboardArgs):
    migration_id: int | None = Field(
        None, ge=1, description="Which pending migration (dashboard_health lists them). Leave out for the next one."
    )


class CommitArgs(DashboardArgs):
    message: str = Field("", max_length=500, description="The commit message; a summary of the changes if empty.")
    branch: str = Field(MAIN_BRANCH, max_length=100, description="The branch whose changes to commit.")


# --- results ----------------------------------------------------------------------------------


def _when(moment: datetime | None) -> str | None:
    return moment.isoformat(timespec="seconds") if moment else None


def _who(user) -> str | None:
    return user.get_username() if user is not None else None


def _counts(dashboard: Dashboard) -> dict[str, int]:
    return {"error": dashboard.errors, "warning": dashboard.warnings, "info": dashboard.infos}


def _deployment(deployment: Deployment | None) -> dict[str, Any] | None:
    if deployment is None:
        return None
    return {"status": deployment.status, "at": _when(deployment.deployed_at), "by": _who(deployment.deployed_by)}


def _problem(problem: ValidationProblem) -> dict[str, str]:
    return {"code": problem.code, "severity": problem.severity, "message": problem.message, "hint": problem.hint}


# --- reading ----------------------------------------------------------------------------------


@registry.tool(
    permission=VIEW,
    summarize=summaries.search,
    choice_words={
        "status": {
            "draft": [r"\bdraft", r"\bчернов"],
            "published": [r"\bpublished", r"\bопубликован"],
            "deprecated": [r"\bdeprecated", r"\bустаревш", r"\bустарел"],
        },
        "has_validation_problems": {
            "true": [r"\b(problem|error|warning|valid|fail|issue|broken)", r"\b(проблем|ошиб|предупрежд|валид|слома)"],
            "false": [
                r"\b(without|no|free of)\b.{0,30}\b(problem|error|warning|issue)",
                r"\b(are|is)\s+(fine|ok|okay|all right|clean|in (good )?order)\b|\bhealthy\b",
                r"\bбез\b.{0,30}\b(проблем|ошиб|предупрежд)",
                r"\bв порядке\b|\bисправн",
            ],
        },
        # "without errors": none of them, as has_validation_problems says.
        "severity": {
            "error": [r"\berror", r"\bошиб"],
            "warning": [r"\bwarning", r"\bпредупрежд"],
            "info": [r"\bnotes?\b", r"\bзамечани"],
        },
        "order": {
            "worst": [
                r"\bmost\b.{0,30}\b(error|problem|issue|warning)|\bworst\b(\s+(shape|state|condition)\b)?",
                r"\b(больше всего|наибольш).{0,30}\b(ошиб|проблем)|\bхудш\w*(\s+состояни\w*)?"
                r"|\bсамы\w* (проблемн|плох)",
            ],
        },
    },
    # The words of a search also match the owner's name, so a name said without these is still found. "Who owns…"
    # and "Чьи…" ask for the owner rather than say one.
    cue_words={
        "tag": [r"\btag", r"\bтег"],
        "owner": [r"^(?!.*\b(who|whose|кто|чей|чья|чьё|чьи)\b).*\b(own|belong|владе|принадлеж)"],
    },
    examples=[
        ("Which dashboards have validation problems?", {"has_validation_problems": True}),
        ("покажи дашборды с проблемами валидации", {"has_validation_problems": True}),
        ("What's broken right now?", {"has_validation_problems": True}),
        ("Anything with errors?", {"has_validation_problems": True}),
        ("Что сейчас сломано?", {"has_validation_problems": True}),
        ("List the dashboards tagged sales", {"tag": "sales"}),
        ("Find the dashboards owned by James Patel", {"owner": "James Patel"}),
        ("Найди дашборд Отток клиентов", {"query": "Отток клиентов"}),
        ("Покажи дашборды с тегом hr", {"tag": "hr"}),
        ("Покажи черновики дашбордов", {"status": "draft"}),
    ],
)
def search_dashboards(args: SearchArgs, ctx: ToolContext) -> dict[str, Any]:
    """Search the catalogue of BI dashboards by words, owner, tag, status or validation problems.

    Use it to find dashboards or their ids, e.g. has_validation_problems=true for the ones with problems (with
    severity=error, those with errors), and order=worst for the worst first ("Which dashboards have the most
    errors?"). All filters are optional and combine. Returns {total, page, pages, order, items}: each item has id,
    title, owner, status, tags and problems (counts by severity: error, warning, info).
    """
    if args.tag.strip():
        selectors.tag_check(args.tag)
    found = selectors.dashboards_search(
        query=args.query,
        owner=args.owner,
        tag=args.tag,
        status=args.status,
        has_validation_problems=args.has_validation_problems,
        severity=args.severity,
        worst_first=args.order == "worst",
    )
    total = found.count()
    start = (args.page - 1) * args.page_size
    items = [
        {
            "id": dashboard.pk,
            "title": dashboard.title,
            "owner": dashboard.owner,
            "status": dashboard.status,
            "tags": [tag.name for tag in dashboard.tags.all()],
            "problems": _counts(dashboard),
        }
        for dashboard in found[start : start + args.page_size]
    ]
    pages = max(1, -(-total // args.page_size))
    return {
        "total": total,
        "page": args.page,
        "page_size": args.page_size,
        "pages": pages,
        "order": args.order,
        "items": items,
    }


@registry.tool(
    permission=VIEW,
    summarize=summaries.health,
    examples=[
        ("How healthy is dashboard 3?", {"dashboard_id": 3}),
        ("Show the validation problems of dashboard 8", {"dashboard_id": 8}),
        ("Is dashboard 6 ready for production?", {"dashboard_id": 6}),
        ("Status of dashboard 4", {"dashboard_id": 4}),
        ("Какие проблемы у дашборда 5?", {"dashboard_id": 5}),
        ("Расскажи о дашборде 2", {"dashboard_id": 2}),
        ("Что с дашбордом 4?", {"dashboard_id": 4}),
        ("Какие миграции ждут дашборд 7?", {"dashboard_id": 7}),
        ("Who owns dashboard 9?", {"dashboard_id": 9}),
        ("Кто владелец дашборда 6?", {"dashboard_id": 6}),
    ],
)
def dashboard_health(args: DashboardArgs, ctx: ToolContext) -> dict[str, Any]:
    """Show one dashboard: its details and health report.

    Use it when the user asks about a dashboard, its validation problems, or whether it can be deployed.
    Returns the title, owner, status, tags, datasets; problems (most severe first, each with code,
    severity, message and a hint saying what to do about it); branches; pending migrations; uncommitted
    changes; and the latest deployment per environment. Production refuses dashboards with errors.
    """
    dashboard = selectors.dashboard_get(args.dashboard_id)
    problems = selectors.problems_of(dashboard)
    counts = {severity: 0 for severity in ValidationProblem.Severity.values}
    for problem in problems:
        counts[problem.severity] += 1
    changes = list(selectors.uncommitted_changes(dashboard).order_by("created_at", "id")[: LIST_LIMIT + 1])
    deployments = dashboard.deployments.select_related("deployed_by")
    latest = {
        environment: _deployment(deployments.filter(environment=environment).first())
        for environment in Deployment.Environment.values
    }
    return {
        "id": dashboard.pk,
        "title": dashboard.title,
        "owner": dashboard.owner,
        "status": dashboard.status,
        "tags": [tag.name for tag in dashboard.tags.all()],
        "datasets": dashboard.datasets,
        "problem_counts": counts,
        "deployable_to_production": counts[ValidationProblem.Severity.ERROR] == 0,
        "problems": [_problem(problem) for problem in problems],
        "branches": [MAIN_BRANCH, *dashboard.branches.values_list("name", flat=True)],
        "pending_migrations": [
            {"id": migration.pk, "name": migration.name, "description": migration.description}
            for migration in selectors.pending_migrations(dashboard)
        ],
        "uncommitted_changes": [
            {"branch": change.branch, "summary": change.summary, "author": change.author}
            for change in changes[:LIST_LIMIT]
        ],
        "more_uncommitted_changes": len(changes) > LIST_LIMIT,
        "latest_deployments": latest,
    }


# --- changing ---------------------------------------------------------------------------------


@registry.tool(
    permission=CREATE_BRANCH,
    summarize=summaries.branch,
    action_words=[r"\b(create|make|open|start|new|branch)", r"\b(созда|сдела|откр|заведи|нов|ответв)"],
    examples=[
        ("Create a branch of dashboard 5", {"dashboard_id": 5}),
        ("New branch fix-filter on dashboard 7", {"dashboard_id": 7, "name": "fix-filter"}),
        ("Нужна новая ветка дашборда 8", {"dashboard_id": 8}),
        ("Создай ветку draft-2 для дашборда 6", {"dashboard_id": 6, "name": "draft-2"}),
        ("Make a branch called cleanup for dashboard 2", {"dashboard_id": 2, "name": "cleanup"}),
    ],
)
def create_branch(args: BranchArgs, ctx: ToolContext) -> dict[str, Any]:
    """Create a branch of a dashboard, to work on it without touching main. Safe: runs at once.

    Returns the branch's name, what it was branched from, and who created it when.
    """
    dashboard = selectors.dashboard_get(args.dashboard_id)
    branch = services.branch_create(dashboard=dashboard, actor=ctx.user, name=args.name, base=args.base)
    return {
        "dashboard_id": dashboard.pk,
        "branch": branch.name,
        "base": branch.base,
        "created_by": _who(ctx.user),
        "created_at": _when(branch.created_at),
    }


@registry.tool(
    permission=DEPLOY,
    requires_confirmation=True,
    summarize=summaries.deployment,
    choice_words={
        "environment": {
            "staging": [r"\bstag", r"\bстейдж", r"\bстэйдж", r"\bстейджинг"],
            "production": [r"\bprod", r"\blive\b", r"\bпрод", r"\bбоев"],
        }
    },
    action_words=[
        r"\b(deploy|release|publish|ship|push|roll out|promote)",
        r"\b(выкат|выкладыв|выложи|задепло|деплой|разверн|развёрт|разверт|опублик|публик|релиз)",
    ],
    examples=[
        ("Deploy dashboard 3 to staging", {"dashboard_id": 3, "environment": "staging"}),
        ("Release dashboard 4 to prod", {"dashboard_id": 4, "environment": "production"}),
        ("Выкати дашборд 9 в прод", {"dashboard_id": 9, "environment": "production"}),
        ("Задеплой дашборд 2 на стейджинг", {"dashboard_id": 2, "environment": "staging"}),
    ],
)
def deploy_dashboard(args: DeployArgs, ctx: ToolContext) -> dict[str, Any]:
    """Deploy a dashboard's latest commit on main to staging or production. Waits for the user's approval.

    Production refuses a dashboard with error-level validation problems (check dashboard_health first).
    Returns the deployment's id, environment, status, the commit deployed and notes worth telling the user.
    """
    dashboard = selectors.dashboard_get(args.dashboard_id)
    deployment = services.dashboard_deploy(dashboard=dashboard, environment=args.environment, actor=ctx.user)
    return {
        "deployment_id": deployment.pk,
        "dashboard_id": dashboard.pk,
        "title": dashboard.title,
        "environment": deployment.environment,
        "status": deployment.status,
        "commit": deployment.commit.sha[:10] if deployment.commit else None,
        "deployed_by": _who(deployment.deployed_by),
        "deployed_at": _when(deployment.deployed_at),
        "notes": deployment.notes.split("; ") if deployment.notes else [],
    }


@registry.tool(
    permission=EXECUTE_MIGRATION,
    requires_confirmation=True,
    summarize=summaries.migration,
    action_words=[
        r"\b(execute|run|apply|perform|migrate)\b",
        r"\b(выполн|запуст|примени|примен|провед|провест|накат|мигрир|смигрир)",
    ],
    examples=[
        ("Execute the next migration for dashboard 1", {"dashboard_id": 1}),
        ("Migrate the data model of dashboard 9", {"dashboard_id": 9}),
        ("Запусти миграцию дашборда 6", {"dashboard_id": 6}),
    ],
)
def execute_migration(args: MigrationArgs, ctx: ToolContext) -> dict[str, Any]:
    """Execute a pending migration of a dashboard's data model. Waits for the user's approval.

    Without migration_id, runs the dashboard's next pending migration. Returns the migration executed
    and how many are still pending.
    """
    dashboard = selectors.dashboard_get(args.dashboard_id)
    migration = services.migration_execute(dashboard=dashboard, actor=ctx.user, migration_id=args.migration_id)
    return {
        "dashboard_id": dashboard.pk,
        "migration_id": migration.pk,
        "name": migration.name,
        "status": migration.status,
        "executed_by": _who(ctx.user),
        "executed_at": _when(migration.executed_at),
        "still_pending": selectors.pending_migrations(dashboard).count(),
    }


@registry.tool(
    permission=COMMIT,
    requires_confirmation=True,
    summarize=summaries.commit,
    action_words=[
        r"\b(commit|save|check in)\b",
        r"\b(закомм|коммит|сохран|зафиксир|фиксир)",
    ],
    # A message or a branch only when the request says it: "the pending changes" is neither. The message is
    # all that follows its cue (the pattern with a `value` group).
    cue_words={
        "message": [
            r"\b(message|saying|comment)",
            r"\b(сообщени|комментари|подпис)",
            r"\b(?:message|saying|comment|сообщени|комментари|подпис)\w*\W+(?P<value>.+)",
        ],
        "branch": [r"\bbranch", r"\bветк"],
    },
    examples=[
        ("Commit dashboard 5", {"dashboard_id": 5}),
        ("Commit dashboard 6 with message fix totals", {"dashboard_id": 6, "message": "fix totals"}),
        ("Сохрани изменения дашборда 3", {"dashboard_id": 3}),
        ("Закоммить правки в дашборде 4", {"dashboard_id": 4}),
    ],
)
def commit_changes(args: CommitArgs, ctx: ToolContext) -> dict[str, Any]:
    """Commit a dashboard's uncommitted changes on a branch (main by default). Waits for the user's approval.

    Returns the commit's id, branch, message and the changes it contains.
    """
    dashboard = selectors.dashboard_get(args.dashboard_id)
    commit = services.changes_commit(dashboard=dashboard, actor=ctx.user, branch=args.branch, message=args.message)
    return {
        "dashboard_id": dashboard.pk,
        "commit": commit.sha[:10],
        "branch": commit.branch,
        "message": commit.message,
        "changes": commit.changes,
        "author": _who(ctx.user),
        "committed_at": _when(commit.created_at),
    }
