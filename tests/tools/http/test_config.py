"""HTTP_SERVICES / HTTP_SERVICES_FILE: what a good list gives, and the clear start-up error a bad one gets."""

from __future__ import annotations

import json
import logging

import pytest
from django.apps import apps
from django.core.exceptions import ImproperlyConfigured

from tests.http_service import SECRET, SECRET_ENV, TOKEN_ENV, billing_entry
from tools.http.config import parse_services, services_from_settings
from tools.http.toolset import register_services
from tools.registry import Tool, ToolArgs, ToolRegistry


def parse(entries, tmp_path, variable="HTTP_SERVICES"):
    return parse_services(entries, variable=variable, base_dir=tmp_path)


def test_a_service_entry_is_read_with_its_secrets_from_the_environment(billing, billing_env, tmp_path):
    entry = billing_entry(billing, "billing.json", base_url=billing.base_url + "/", identity_header="X-Acting-User")
    [service] = parse(json.dumps([entry]), tmp_path)

    assert service.name == "billing"
    assert service.base_url == billing.base_url  # the trailing slash is dropped
    assert service.openapi == str(tmp_path / "billing.json")  # relative to the list's folder
    assert service.timeout == 1 and service.identity_header == "X-Acting-User"
    assert service.identity_secret == SECRET and service.token
    assert service.operations is None and service.safe_operations == service.confirm_operations == frozenset()
    # Secrets stay out of anything that gets logged.
    assert SECRET not in repr(service) and service.token not in repr(service)


def test_defaults(billing, billing_env, tmp_path):
    entry = billing_entry(billing, "billing.json")
    del entry["timeout"]
    [service] = parse([entry], tmp_path)
    assert service.timeout == 10 and service.identity_header == "X-User-Token" and service.permission is None


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        (lambda e: "[{", "HTTP_SERVICES is not valid JSON"),
        (lambda e: json.dumps(e), "HTTP_SERVICES must be a JSON list of services"),
        (lambda e: [{k: v for k, v in e.items() if k != "base_url"}], "service 'billing': base_url: Field required"),
        (lambda e: [{**e, "base_url": "ftp://files.example"}], "service 'billing': base_url: must be an http://"),
        (lambda e: [{**e, "base_url": "http://u:p@h.example"}], "base_url: must have no query, fragment or creden"),
        (lambda e: [{**e, "tokn_env": "X"}], "service 'billing': tokn_env: Extra inputs are not permitted"),
        (lambda e: [{**e, "name": "bill ing"}], "service 'bill ing': name: must start with a letter"),
        (lambda e: [{**e, "name": 7}], "service #1: name: Input should be a valid string"),
        (lambda e: [e, e], "service 'billing': the name is used by another service"),
        (lambda e: [{**e, "timeout": 0}], "service 'billing': timeout: Input should be greater than 0"),
        (lambda e: [{**e, "identity_header": "Authorization"}], "identity_header: must be a header name of its own"),
        (lambda e: [{**e, "token_env": "not a name"}], "token_env: must be the name of an environment variable"),
        (lambda e: [{**e, "identity_secret_env": "UNSET_SECRET_VAR"}], "UNSET_SECRET_VAR is not set"),
        (lambda e: [{**e, "permission": "nodot"}], "permission: must be a Django permission"),
        (lambda e: [{**e, "openapi": "ftp://x/doc.json"}], "openapi must be a file path or an http(s) URL"),
    ],
)
def test_a_bad_list_stops_start_up_naming_the_variable_and_the_service(
    billing, billing_env, tmp_path, change, expected
):
    with pytest.raises(ImproperlyConfigured) as caught:
        parse(change(billing_entry(billing, "billing.json")), tmp_path)
    assert expected in str(caught.value)
    assert str(caught.value).startswith("HTTP_SERVICES")


def test_a_short_identity_secret_is_refused(billing, monkeypatch, tmp_path):
    monkeypatch.setenv(SECRET_ENV, "short")
    with pytest.raises(ImproperlyConfigured, match=f"{SECRET_ENV} must be at least 32 characters"):
        parse([billing_entry(billing, "billing.json")], tmp_path)


def test_the_token_may_be_missing_at_start_up(billing, monkeypatch, tmp_path, caplog):
    """The token may be one this server issues, so only its use fails (see test_calls)."""
    monkeypatch.setenv(SECRET_ENV, SECRET)
    monkeypatch.delenv(TOKEN_ENV, raising=False)
    openapi = billing.write_openapi(tmp_path / "billing.json")
    [service] = parse([billing_entry(billing, str(openapi))], tmp_path)
    assert service.token is None
    with caplog.at_level(logging.WARNING):
        register_services(ToolRegistry(), [service])
    assert f"{TOKEN_ENV} is not set" in caplog.text


# --- from the settings ---------------------------------------------------------------------------


def test_services_file_with_openapi_beside_it(billing, billing_env, tmp_path, settings):
    folder = tmp_path / "conf"
    folder.mkdir()
    billing.write_openapi(folder / "billing.json")
    (folder / "services.json").write_text(json.dumps([billing_entry(billing, "billing.json")]))
    settings.HTTP_SERVICES_FILE = str(folder / "services.json")
    settings.HTTP_SERVICES = ""

    [service] = services_from_settings()
    assert service.openapi == str(folder / "billing.json")
    assert str(service) == "HTTP_SERVICES_FILE: service 'billing'"


def test_inline_services_and_none(billing, billing_env, settings):
    settings.HTTP_SERVICES_FILE = ""
    settings.HTTP_SERVICES = ""
    assert services_from_settings() == []
    settings.HTTP_SERVICES = json.dumps([billing_entry(billing, "/srv/billing.json")])
    assert [service.openapi for service in services_from_settings()] == ["/srv/billing.json"]


def test_settings_errors(tmp_path, settings):
    settings.HTTP_SERVICES_FILE = str(tmp_path / "missing.json")
    settings.HTTP_SERVICES = "[]"
    with pytest.raises(ImproperlyConfigured, match="Set HTTP_SERVICES_FILE or HTTP_SERVICES, not both"):
        services_from_settings()
    settings.HTTP_SERVICES = ""
    with pytest.raises(ImproperlyConfigured, match=r"HTTP_SERVICES_FILE: cannot read .*missing.json"):
        services_from_settings()
    (tmp_path / "bad.json").write_text("{not json")
    settings.HTTP_SERVICES_FILE = str(tmp_path / "bad.json")
    with pytest.raises(ImproperlyConfigured, match="HTTP_SERVICES_FILE is not valid JSON"):
        services_from_settings()


def test_ready_registers_the_configured_services(billing, billing_env, openapi_file, settings, monkeypatch):
    settings.HTTP_SERVICES_FILE = ""
    settings.HTTP_SERVICES = json.dumps([billing_entry(billing, str(openapi_file))])
    fresh = ToolRegistry()
    monkeypatch.setattr("tools.registry.registry", fresh)
    app = apps.get_app_config("http_tools")
    monkeypatch.setattr(app, "services", app.services)  # put back after the test

    app.ready()

    assert [service.name for service in app.services] == ["billing"]
    assert fresh.has("billing_getInvoice") and fresh.has("billing_createRefund")
    assert billing.requests == []  # a file document: nothing fetched


def test_the_global_registry_holds_no_http_tools_by_default():
    from tools.registry import registry

    assert not [tool for tool in registry.all() if tool.name.startswith("billing_")]


# --- the OpenAPI document ------------------------------------------------------------------------


def test_document_errors_stop_start_up_naming_the_service(make_services, tmp_path):
    with pytest.raises(ImproperlyConfigured, match=r"service 'billing': cannot read the OpenAPI document .*nope"):
        register_services(ToolRegistry(), make_services(openapi=str(tmp_path / "nope.json")))

    (tmp_path / "swagger.json").write_text(json.dumps({"swagger": "2.0", "paths": {}}))
    with pytest.raises(ImproperlyConfigured, match="service 'billing': only OpenAPI 3 documents are supported"):
        register_services(ToolRegistry(), make_services(openapi=str(tmp_path / "swagger.json")))

    (tmp_path / "bad.yaml").write_text("openapi: [3")
    with pytest.raises(ImproperlyConfigured, match="neither JSON nor YAML"):
        register_services(ToolRegistry(), make_services(openapi=str(tmp_path / "bad.yaml")))


def test_yaml_documents_are_read(billing, make_registry, tmp_path):
    import yaml

    from tests.http_service import OPENAPI

    (tmp_path / "billing.yaml").write_text(yaml.safe_dump(OPENAPI))
    assert make_registry(openapi=str(tmp_path / "billing.yaml")).has("billing_getInvoice")


def test_operation_lists_must_name_real_operations(make_services):
    with pytest.raises(ImproperlyConfigured, match=r"safe_operations names operations .* does not have: refundAll"):
        register_services(ToolRegistry(), make_services(safe_operations=["refundAll"]))
    with pytest.raises(ImproperlyConfigured, match="cannot be both safe and in need of confirmation"):
        register_services(
            ToolRegistry(), make_services(safe_operations=["createRefund"], confirm_operations=["createRefund"])
        )


def test_a_tool_name_taken_already_is_a_start_up_error(make_services):
    registry = ToolRegistry()
    registry.register(Tool(name="billing_getInvoice", description="x", args_model=ToolArgs, func=lambda a, c: None))
    with pytest.raises(ImproperlyConfigured, match="'billing_getInvoice' is registered already"):
        register_services(registry, make_services())


# --- an OpenAPI document behind a URL: fetched once, when first needed -----------------------------


def document_fetches(billing) -> list:
    return [r for r in billing.requests if r.path == "/api/openapi.json"]


def test_a_url_document_is_fetched_at_the_first_lookup_only(billing, make_services):
    registry = ToolRegistry()
    register_services(registry, make_services(openapi=f"{billing.base_url}/openapi.json"))
    assert document_fetches(billing) == []

    assert registry.has("billing_getInvoice")
    assert len(registry.all()) == 10
    [fetch] = document_fetches(billing)
    # Same host as the API: the document is asked for with the service token.
    assert fetch.headers["authorization"].startswith("Bearer ey")


def test_a_url_document_that_cannot_be_fetched_leaves_the_service_out_for_now(make_services, caplog):
    registry = ToolRegistry()
    with caplog.at_level(logging.ERROR):
        register_services(registry, make_services(openapi="http://127.0.0.1:9/openapi.json"))
        assert registry.all() == []
    assert "could not fetch http://127.0.0.1:9/openapi.json" in caplog.text
    assert not registry.has("billing_getInvoice")  # not asked again within RETRY_AFTER


# --- agentchat/settings.py -------------------------------------------------------------------------


def test_the_settings_and_their_defaults(monkeypatch):
    import runpy

    from django.conf import settings as live

    for name in ("HTTP_SERVICES_FILE", "HTTP_SERVICES", "HTTP_IDENTITY_TOKEN_SECONDS", "SERVICE_TOKEN_DAYS"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("SECRET_KEY", "test-only-secret-key")
    config = runpy.run_path(str(live.BASE_DIR / "agentchat" / "settings.py"))
    assert (config["HTTP_SERVICES_FILE"], config["HTTP_SERVICES"]) == ("", "")
    assert (config["HTTP_IDENTITY_TOKEN_SECONDS"], config["SERVICE_TOKEN_DAYS"]) == (60, 30)
    assert "tools.http" in config["INSTALLED_APPS"]

    monkeypatch.setenv("HTTP_IDENTITY_TOKEN_SECONDS", "a minute")
    with pytest.raises(ImproperlyConfigured, match="HTTP_IDENTITY_TOKEN_SECONDS"):
        runpy.run_path(str(live.BASE_DIR / "agentchat" / "settings.py"))
