"""The catalogue in the Django admin."""

from __future__ import annotations

import pytest
from django.urls import reverse

from tools.dashboards.models import Branch, Change, Commit, Dashboard, Deployment, Migration, Tag, ValidationProblem

pytestmark = pytest.mark.django_db

MODELS = [Dashboard, Tag, ValidationProblem, Branch, Commit, Change, Migration, Deployment]


@pytest.mark.parametrize("model", MODELS, ids=lambda model: model.__name__)
def test_each_change_list(client, admin_user, catalogue, model):
    client.force_login(admin_user)
    response = client.get(reverse(f"admin:dashboards_{model._meta.model_name}_changelist"))
    assert response.status_code == 200
    assert response.context["cl"].result_count == model.objects.count() > 0


def test_the_dashboard_list_counts_problems_and_filters_by_severity(client, admin_user, catalogue):
    client.force_login(admin_user)
    url = reverse("admin:dashboards_dashboard_changelist")
    with_errors = client.get(url, {"problems__severity": "error", "tags__id__exact": Tag.objects.get(name="sales").pk})
    rows = {row.pk: (row.errors, row.warnings) for row in with_errors.context["cl"].result_list}
    # The filters join problems and tags: the counts must still be each dashboard's own.
    assert rows == {14: (1, 1), 19: (1, 1), 30: (1, 1), 48: (1, 0), 55: (1, 1)}


def test_the_dashboard_page_shows_its_problems(client, admin_user, catalogue):
    client.force_login(admin_user)
    response = client.get(reverse("admin:dashboards_dashboard_change", args=[42]))
    assert response.status_code == 200
    page = response.content.decode()
    assert "Воронка продаж по регионам" in page and "stale_data" in page and "0003_region_code" in page


def test_deployments_and_commits_are_history(client, admin_user, catalogue):
    client.force_login(admin_user)
    deployment = Deployment.objects.first()
    response = client.post(reverse("admin:dashboards_deployment_delete", args=[deployment.pk]), {"post": "yes"})
    assert response.status_code == 403
    assert Deployment.objects.filter(pk=deployment.pk).exists()
    assert client.get(reverse("admin:dashboards_commit_add")).status_code == 403
