"""The demo catalogue that `manage.py load_demo` loads: 64 dashboards with fixed ids, in English and Russian.

Loaded once, into an empty catalogue: after that nothing here touches it again, so what a person changed,
added or deleted stays that way. Every dangerous tool has something to do: dashboard 42 (warnings only, so
it may go to production) has pending migrations and uncommitted changes; dashboard 7 has errors.
"""

from __future__ import annotations

import hashlib
from collections.abc import Collection
from dataclasses import dataclass
from datetime import timedelta

from django.contrib.auth import get_user_model
from django.contrib.auth.models import Permission
from django.core.management.color import no_style
from django.db import connection, transaction
from django.db.models import Q
from django.utils import timezone

from . import permissions
from .models import MAIN_BRANCH, Branch, Change, Commit, Dashboard, Deployment, Migration, Tag, ValidationProblem, fold

P, D, X = Dashboard.Status.PUBLISHED, Dashboard.Status.DRAFT, Dashboard.Status.DEPRECATED
Severity = ValidationProblem.Severity
ERROR, WARNING, INFO = Severity.ERROR, Severity.WARNING, Severity.INFO

EMMA, JAMES, OLIVIA, DANIEL = "Emma Clarke", "James Patel", "Olivia Chen", "Daniel Brooks"
IRINA, ALEXEY, MARIA, DMITRY = "Ирина Смирнова", "Алексей Кузнецов", "Мария Иванова", "Дмитрий Орлов"

# id = position, from 1: (title, owner, status, tags, datasets)
CATALOGUE: list[tuple[str, str, str, str, str]] = [
    ("Executive KPI overview", EMMA, P, "executive finance", "finance.kpi_daily"),
    ("Выручка по месяцам", IRINA, P, "finance sales", "finance.revenue_monthly"),
    ("Marketing campaign performance", OLIVIA, P, "marketing", "marketing.campaigns marketing.spend"),
    ("Отток клиентов", MARIA, P, "customers retention", "crm.customers billing.subscriptions"),
    ("Warehouse stock levels", DANIEL, P, "logistics operations", "wms.stock"),
    ("Продажи по каналам", ALEXEY, P, "sales", "sales.orders"),
    ("Customer support SLA", JAMES, P, "support", "support.tickets"),
    ("Бюджет маркетинга", MARIA, D, "marketing finance", "marketing.spend"),
    ("Web traffic and conversions", OLIVIA, P, "marketing product", "web.sessions"),
    ("Дебиторская задолженность", IRINA, P, "finance", "finance.receivables"),
    ("Headcount and hiring", EMMA, P, "hr", "hr.employees hr.requisitions"),
    ("Логистика: сроки доставки", DMITRY, P, "logistics", "tms.shipments"),
    ("Product usage funnel", JAMES, P, "product", "product.events"),
    ("Прогноз продаж на квартал", ALEXEY, D, "sales forecast", "sales.pipeline"),
    ("Cash flow statement", EMMA, P, "finance", "finance.gl_entries"),
    ("NPS и удовлетворённость клиентов", MARIA, P, "customers support", "surveys.nps"),
    ("Inventory turnover", DANIEL, P, "logistics finance", "wms.stock finance.cogs"),
    ("Эффективность колл-центра", DMITRY, P, "support operations", "telephony.calls"),
    ("Regional sales leaderboard", JAMES, P, "sales", "sales.orders crm.accounts"),
    ("Расходы на ИТ-инфраструктуру", ALEXEY, P, "finance it", "finance.it_costs"),
    ("Churn risk scoring", OLIVIA, D, "customers risk", "ml.churn_scores"),
    ("Продажи новых продуктов", IRINA, P, "sales product", "sales.orders"),
    ("Employee attrition", EMMA, P, "hr", "hr.employees"),
    ("Качество данных CRM", DMITRY, P, "data-quality", "crm.accounts"),
    ("Supplier performance", DANIEL, P, "procurement", "procurement.orders"),
    ("Маржинальность по категориям", IRINA, P, "finance sales", "finance.margin"),
    ("Fraud monitoring", JAMES, P, "risk", "payments.transactions"),
    ("Воронка найма", MARIA, D, "hr", "hr.requisitions"),
    ("Mobile app engagement", OLIVIA, P, "product", "product.events"),
    ("Продажи в рознице (устаревший)", ALEXEY, X, "sales", "legacy.retail_sales"),
    ("Quarterly board pack", EMMA, P, "executive finance", "finance.kpi_quarterly"),
    ("Загрузка производственных линий", DMITRY, P, "operations", "mes.lines"),
    ("Subscription revenue (MRR)", JAMES, P, "finance", "billing.subscriptions"),
    ("Эффективность рекламы в соцсетях", MARIA, P, "marketing", "marketing.social"),
    ("Returns and refunds", DANIEL, P, "sales support", "sales.returns"),
    ("Дашборд руководителя отдела продаж", ALEXEY, P, "sales executive", "sales.orders sales.pipeline"),
    ("Payroll costs", EMMA, P, "hr finance", "hr.payroll"),
    ("Отчёт по складским остаткам", DMITRY, P, "logistics", "wms.stock"),
    ("A/B test results", OLIVIA, P, "product", "experiments.results"),
    ("Продажи партнёров", IRINA, P, "sales partners", "partners.orders"),
    ("Data platform costs", JAMES, P, "it finance", "cloud.billing"),
    ("Воронка продаж по регионам", ALEXEY, P, "sales", "sales.orders crm.regions"),
    ("Customer lifetime value", OLIVIA, P, "customers finance", "crm.customers billing.invoices"),
    ("Обращения в поддержку по темам", MARIA, P, "support", "support.tickets"),
    ("Fleet utilisation", DANIEL, P, "logistics", "tms.vehicles"),
    ("План-факт по бюджету", IRINA, P, "finance", "finance.budget finance.gl_entries"),
    ("Website performance (legacy)", OLIVIA, X, "product", "web.sessions_old"),
    ("Мониторинг цен конкурентов", ALEXEY, D, "sales pricing", "pricing.competitors"),
    ("Training completion", EMMA, P, "hr", "hr.training"),
    ("Продажи по менеджерам", ALEXEY, P, "sales", "sales.orders"),
    ("Energy consumption", DANIEL, P, "operations", "iot.meters"),
    ("Эффективность email-рассылок", MARIA, P, "marketing", "marketing.email"),
    ("Order fulfilment times", DANIEL, P, "logistics operations", "wms.orders"),
    ("Кредитный риск клиентов", DMITRY, P, "risk finance", "risk.credit_scores"),
    ("Sales pipeline health", JAMES, P, "sales forecast", "sales.pipeline"),
    ("Отчёт по отпускам сотрудников", MARIA, P, "hr", "hr.leave"),
    ("Product catalogue quality", OLIVIA, D, "product data-quality", "catalog.items"),
    ("Налоговая отчётность", IRINA, P, "finance tax", "finance.tax"),
    ("Support backlog ageing", JAMES, P, "support", "support.tickets"),
    ("Выполнение плана продаж", ALEXEY, P, "sales executive", "sales.targets sales.orders"),
    ("Cloud cost anomalies", JAMES, P, "it finance", "cloud.billing"),
    ("Аналитика программы лояльности", MARIA, P, "customers marketing", "loyalty.members"),
    ("Store footfall (legacy)", DANIEL, X, "sales", "legacy.footfall"),
    ("Сводка для совета директоров", IRINA, D, "executive", "finance.kpi_quarterly"),
]

# code: (severity, message, hint); {dataset} is the dashboard's first dataset.
PROBLEMS: dict[str, tuple[str, str, str]] = {
    "missing_dataset": (
        ERROR,
        "Dataset {dataset} no longer exists, so 3 charts show no data.",
        "Point the charts at the dataset that replaced it, or remove them, then validate again.",
    ),
    "broken_filter": (
        ERROR,
        "The Region filter uses the column region, which was renamed to region_code in {dataset}.",
        "Edit the filter to use region_code.",
    ),
    "invalid_sql": (
        ERROR,
        "A chart's custom SQL fails on {dataset}: column net_amount does not exist.",
        "Fix the query (the column is now amount_net) or rebuild the chart in the visual editor.",
    ),
    "no_row_level_security": (
        ERROR,
        "Row-level security is off although {dataset} holds personal data.",
        "Turn on row-level security for the dataset before the dashboard is shared again.",
    ),
    "slow_query": (
        WARNING,
        "The slowest chart takes 14 s to load from {dataset}; the limit is 5 s.",
        "Add a default date filter, or read from the pre-aggregated table.",
    ),
    "stale_data": (
        WARNING,
        "{dataset} was last refreshed 9 days ago, but its schedule is daily.",
        "Check the dataset's refresh job and run it again once its source is back.",
    ),
    "deprecated_dataset": (
        WARNING,
        "{dataset} is deprecated and will be removed at the end of the quarter.",
        "Move the charts to the dataset that replaces it before then.",
    ),
    "unused_charts": (
        INFO,
        "2 charts are hidden and used by no tab.",
        "Delete them: the dashboard will load faster.",
    ),
    "single_editor": (
        INFO,
        "Only its owner can edit this dashboard.",
        "Add a second editor so that changes do not wait for one person.",
    ),
}

DASHBOARD_PROBLEMS: dict[int, list[str]] = {
    3: ["deprecated_dataset"],
    5: ["stale_data", "unused_charts"],
    7: ["missing_dataset", "slow_query"],
    9: ["slow_query"],
    12: ["broken_filter"],
    14: ["invalid_sql", "stale_data"],
    17: ["unused_charts"],
    19: ["broken_filter", "slow_query", "unused_charts"],
    21: ["missing_dataset"],
    24: ["no_row_level_security"],
    27: ["slow_query", "stale_data"],
    30: ["deprecated_dataset", "missing_dataset"],
    33: ["invalid_sql"],
    36: ["unused_charts", "single_editor"],
    38: ["stale_data"],
    42: ["stale_data", "slow_query", "unused_charts"],
    45: ["single_editor"],
    48: ["broken_filter"],
    51: ["stale_data"],
    55: ["slow_query", "invalid_sql"],
    58: ["no_row_level_security", "single_editor"],
    61: ["deprecated_dataset"],
}

# (name, description, executed?)
MIGRATIONS: dict[int, list[tuple[str, str, bool]]] = {
    5: [("0001_initial", "Initial data model.", True), ("0002_stock_by_bin", "Split stock by storage bin.", False)],
    12: [("0001_initial", "Initial data model.", True), ("0002_delivery_sla_days", "Add the SLA in days.", False)],
    27: [("0001_initial", "Initial data model.", True), ("0002_card_country", "Add the card's country.", False)],
    42: [
        ("0001_initial", "Initial data model.", True),
        ("0002_add_channel", "Add the sales channel to orders.", True),
        ("0003_region_code", "Use region_code instead of region in every chart and filter.", False),
        ("0004_split_channel", "Split the channel into online and offline.", False),
    ],
    50: [("0001_initial", "Initial data model.", True), ("0002_manager_team", "Add the manager's team.", False)],
}

# (branch, summary, author)
CHANGES: dict[int, list[tuple[str, str, str]]] = {
    7: [(MAIN_BRANCH, "Removed the chart that read the deleted dataset", JAMES)],
    19: [(MAIN_BRANCH, "Fixed the Region filter to use region_code", JAMES)],
    33: [(MAIN_BRANCH, "Rewrote the MRR query to use amount_net", JAMES)],
    42: [
        (MAIN_BRANCH, "Added a chart: conversion by region", ALEXEY),
        (MAIN_BRANCH, "Renamed the tab Overview to Summary", IRINA),
        ("feature/regional-breakdown", "Added a drill-down from region to city", ALEXEY),
    ],
    60: [(MAIN_BRANCH, "Updated the sales targets for the new quarter", ALEXEY)],
}

# (dashboard, branch, created by)
BRANCHES: list[tuple[int, str, str]] = [(42, "feature/regional-breakdown", "bob"), (14, "forecast-v2", "alice")]

GRANTS: dict[str, tuple[str, ...]] = {"alice": permissions.ALL, "bob": (permissions.VIEW,)}


@dataclass(frozen=True)
class DemoSummary:
    loaded: bool
    dashboards: int
    with_problems: int


def permission_rows(names: Collection[str]) -> list[Permission]:
    """Permission rows for "app_label.codename" strings."""
    query = Q(pk__in=[])
    for name in names:
        app_label, codename = name.split(".", 1)
        query |= Q(content_type__app_label=app_label, codename=codename)
    return list(Permission.objects.filter(query))


def _sha(*parts: object) -> str:
    return hashlib.sha1(":".join(map(str, ("demo", *parts))).encode()).hexdigest()  # noqa: S324 - an id, not a secret


def _create_catalogue(users: dict, now) -> None:
    """Every dashboard and all that belongs to it: one statement per table (row by row, it took 600)."""
    dashboards = []
    for number, (title, owner, status, _, datasets) in enumerate(CATALOGUE, start=1):
        dashboard = Dashboard(
            id=number,
            title=title,
            owner=owner,
            status=status,
            datasets=datasets.split(),
            description=f"{title}. Source: {', '.join(datasets.split())}.",
        )
        dashboard.fill_search_fields()
        dashboards.append(dashboard)
    Dashboard.objects.bulk_create(dashboards)

    tags_of = {number: [fold(name) for name in entry[3].split()] for number, entry in enumerate(CATALOGUE, start=1)}
    names = list(dict.fromkeys(name for names in tags_of.values() for name in names))
    Tag.objects.bulk_create([Tag(name=name) for name in names], ignore_conflicts=True)
    tag_ids = dict(Tag.objects.filter(name__in=names).values_list("name", "pk"))
    Dashboard.tags.through.objects.bulk_create(
        Dashboard.tags.through(dashboard_id=number, tag_id=tag_ids[name])
        for number, names in tags_of.items()
        for name in names
    )

    ages = {d.pk: timedelta(days=3 * (len(CATALOGUE) - d.pk) + 10) for d in dashboards}
    ValidationProblem.objects.bulk_create(
        ValidationProblem(
            dashboard=d,
            code=code,
            severity=PROBLEMS[code][0],
            message=PROBLEMS[code][1].format(dataset=d.datasets[0]),
            hint=PROBLEMS[code][2],
            detected_at=now - timedelta(days=2, hours=d.pk),
        )
        for d in dashboards
        for code in DASHBOARD_PROBLEMS.get(d.pk, [])
    )
    initial = Commit.objects.bulk_create(
        Commit(
            dashboard=d,
            sha=_sha(d.pk, "initial"),
            message="Imported from the BI catalogue",
            changes=["First version"],
            created_at=now - ages[d.pk],
        )
        for d in dashboards
    )
    production, staging = Deployment.Environment.PRODUCTION, Deployment.Environment.STAGING
    Deployment.objects.bulk_create(
        Deployment(
            dashboard=d,
            environment=environment,
            commit=commit,
            deployed_at=now - ages[d.pk] + after,
            status=Deployment.Status.SUCCEEDED,
        )
        for d, commit in zip(dashboards, initial, strict=True)
        for environment, after in [(production, timedelta(days=1)), (staging, timedelta(hours=2))]
        if environment == staging or d.status != Dashboard.Status.DRAFT
    )
    Migration.objects.bulk_create(
        Migration(
            dashboard_id=number,
            name=name,
            description=description,
            status=Migration.Status.EXECUTED if executed else Migration.Status.PENDING,
            created_at=now - ages[number] + timedelta(days=position),
            executed_at=now - ages[number] + timedelta(days=position, hours=1) if executed else None,
        )
        for number, migrations in sorted(MIGRATIONS.items())
        for position, (name, description, executed) in enumerate(migrations)
    )
    Branch.objects.bulk_create(
        Branch(dashboard_id=number, name=name, created_by=users.get(username), created_at=now - timedelta(days=4))
        for number, name, username in sorted(BRANCHES)
    )
    Change.objects.bulk_create(
        Change(
            dashboard_id=number,
            branch=branch,
            summary=summary,
            author=author,
            created_at=now - timedelta(days=1, minutes=-position),
        )
        for number, changes in sorted(CHANGES.items())
        for position, (branch, summary, author) in enumerate(changes)
    )


@transaction.atomic
def load(*, created_users: Collection[str] = ()) -> DemoSummary:
    """Load the catalogue into an empty one; grant the demo users their permissions with it.

    A user created just now (`created_users`) gets their permissions too; otherwise permissions are only
    granted along with the catalogue, so that one an administrator took away is not given back.
    """
    users = {user.get_username(): user for user in get_user_model().objects.filter(username__in=GRANTS)}
    fresh = not Dashboard.objects.exists()
    if fresh:
        _create_catalogue(users, timezone.now())
        # Ids were given explicitly: move PostgreSQL's sequence past them (SQLite needs nothing).
        with connection.cursor() as cursor:
            for statement in connection.ops.sequence_reset_sql(no_style(), [Dashboard]):
                cursor.execute(statement)
    for username, granted in GRANTS.items():
        if (user := users.get(username)) is not None and (fresh or username in created_users):
            user.user_permissions.add(*permission_rows(granted))
    return DemoSummary(
        loaded=fresh,
        dashboards=Dashboard.objects.count(),
        with_problems=Dashboard.objects.filter(problems__isnull=False).distinct().count(),
    )
