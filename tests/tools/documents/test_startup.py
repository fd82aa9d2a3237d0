"""The settings of files, and the start-up check that XLSX XML is parsed by defusedxml."""

from __future__ import annotations

import importlib.util

import pytest
from django.core.exceptions import ImproperlyConfigured

from tests.agentchat.test_settings import load_settings
from tools.documents import apps

NAMES = ["LLM_VISION", "DOCUMENT_PARSE_TIMEOUT", "DOCUMENT_PARSE_MEMORY_MB"]


@pytest.fixture
def env(monkeypatch):
    for name in NAMES:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("SECRET_KEY", "test-only-secret-key")
    return monkeypatch


def test_defaults(env):
    config = load_settings()

    assert (config["LLM_VISION"], config["DOCUMENT_PARSE_TIMEOUT"], config["DOCUMENT_PARSE_MEMORY_MB"]) == (
        False,
        120.0,
        1024,
    )
    assert "tools.documents" in config["INSTALLED_APPS"]


def test_values_from_the_environment(env):
    env.setenv("LLM_VISION", "1")
    env.setenv("DOCUMENT_PARSE_TIMEOUT", "2.5")
    env.setenv("DOCUMENT_PARSE_MEMORY_MB", "512")

    config = load_settings()

    assert (config["LLM_VISION"], config["DOCUMENT_PARSE_TIMEOUT"], config["DOCUMENT_PARSE_MEMORY_MB"]) == (
        True,
        2.5,
        512,
    )


@pytest.mark.parametrize(
    ("name", "value"), [("LLM_VISION", "maybe"), ("DOCUMENT_PARSE_TIMEOUT", "0"), ("DOCUMENT_PARSE_MEMORY_MB", "64")]
)
def test_a_bad_value_names_the_variable(env, name, value):
    env.setenv(name, value)

    with pytest.raises(ImproperlyConfigured, match=name):
        load_settings()


def test_start_up_fails_loudly_without_defusedxml(monkeypatch):
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "defusedxml" else real(name, *a))

    with pytest.raises(ImproperlyConfigured, match="defusedxml is not installed"):
        apps.require_defusedxml()


def test_start_up_fails_when_openpyxl_is_not_using_defusedxml(monkeypatch):
    monkeypatch.setattr("openpyxl.xml.DEFUSEDXML", False)

    with pytest.raises(ImproperlyConfigured, match="openpyxl is not using defusedxml"):
        apps.require_defusedxml()


def test_the_check_passes_here():
    apps.require_defusedxml()
