from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from tests.http_service import SECRET, SECRET_ENV, TOKEN_ENV, BillingService, agent_token, billing_entry
from tools.http.config import Service, parse_services
from tools.http.toolset import register_services
from tools.registry import ToolRegistry


@pytest.fixture
def billing():
    with BillingService(secret=SECRET) as service:
        yield service


@pytest.fixture
def billing_env(monkeypatch) -> None:
    monkeypatch.setenv(SECRET_ENV, SECRET)
    monkeypatch.setenv(TOKEN_ENV, agent_token())


@pytest.fixture
def openapi_file(billing, tmp_path):
    return billing.write_openapi(tmp_path / "billing.json")


@pytest.fixture
def make_services(billing, billing_env, openapi_file, tmp_path) -> Callable[..., list[Service]]:
    def make(**overrides: Any) -> list[Service]:
        entry = billing_entry(billing, **{"openapi": str(openapi_file), **overrides})
        return parse_services([entry], variable="HTTP_SERVICES", base_dir=tmp_path)

    return make


@pytest.fixture
def make_registry(make_services) -> Callable[..., ToolRegistry]:
    def make(**overrides: Any) -> ToolRegistry:
        registry = ToolRegistry()
        register_services(registry, make_services(**overrides))
        return registry

    return make


@pytest.fixture
def tools(make_registry) -> ToolRegistry:
    return make_registry()
