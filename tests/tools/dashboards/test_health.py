"""dashboard_health: one dashboard's problems, most severe first, each with what to do about it."""

from __future__ import annotations

import pytest

from tools.dashboards.exceptions import DashboardNotFound

from .conftest import call

pytestmark = pytest.mark.django_db


def health(dashboard_id: int):
    return call("dashboard_health", None, dashboard_id=dashboard_id)


def test_dashboard_42(catalogue):
    report = health(42)

    assert (report["id"], report["title"], report["owner"]) == (42, "Воронка продаж по регионам", "Алексей Кузнецов")
    assert report["problem_counts"] == {"error": 0, "warning": 2, "info": 1}
    assert report["deployable_to_production"] is True
    assert [(p["severity"], p["code"]) for p in report["problems"]] == [
        ("warning", "stale_data"),
        ("warning", "slow_query"),
        ("info", "unused_charts"),
    ]
    assert all(p["message"] and p["hint"] for p in report["problems"])
    assert "sales.orders" in report["problems"][0]["message"]
    assert report["branches"] == ["main", "feature/regional-breakdown"]
    assert [m["name"] for m in report["pending_migrations"]] == ["0003_region_code", "0004_split_channel"]
    assert [(c["branch"], c["summary"]) for c in report["uncommitted_changes"]] == [
        ("main", "Added a chart: conversion by region"),
        ("main", "Renamed the tab Overview to Summary"),
        ("feature/regional-breakdown", "Added a drill-down from region to city"),
    ]
    assert report["latest_deployments"]["production"]["status"] == "succeeded"


def test_errors_come_first_and_block_production(catalogue):
    report = health(7)
    assert [p["severity"] for p in report["problems"]] == ["error", "warning"]
    assert report["problems"][0]["code"] == "missing_dataset"
    assert report["deployable_to_production"] is False


def test_a_healthy_dashboard(catalogue):
    report = health(1)
    assert report["problems"] == [] and report["problem_counts"] == {"error": 0, "warning": 0, "info": 0}
    assert report["pending_migrations"] == [] and report["uncommitted_changes"] == []


def test_a_draft_was_never_in_production(catalogue):
    assert health(8)["latest_deployments"]["production"] is None


def test_an_unknown_id_is_a_clear_error(catalogue):
    with pytest.raises(DashboardNotFound, match="There is no dashboard with id 999"):
        health(999)
