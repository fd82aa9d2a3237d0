"""agentchat/settings.py read fresh under a patched environment (docs/operations.md)."""

from __future__ import annotations

import runpy
import shutil
import stat
from pathlib import Path

import pytest
from django.core.exceptions import ImproperlyConfigured

SETTINGS_PATH = Path(__file__).resolve().parents[2] / "agentchat" / "settings.py"

ENV_NAMES = [
    "SECRET_KEY",
    "DEBUG",
    "ALLOWED_HOSTS",
    "CSRF_TRUSTED_ORIGINS",
    "DATABASE_URL",
    "DATABASE_PREPARED_STATEMENTS",
    "DATABASE_TRIP_ON_LOOP",
    "REDIS_URL",
    "LLM_PROVIDER",
    "LLM_MODEL",
    "LLM_API_KEY",
    "LLM_BASE_URL",
    "LLM_TIMEOUT",
    "AGENT_MAX_ROUNDS",
    "CONTEXT_TOKEN_BUDGET",
    "RUN_HEARTBEAT_TIMEOUT",
    "JWT_ACCESS_MINUTES",
    "JWT_REFRESH_DAYS",
    "LOG_LEVEL",
]


@pytest.fixture
def clean_env(monkeypatch):
    """No deployment variable set except a SECRET_KEY, so no key file is ever written."""
    for name in ENV_NAMES:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("SECRET_KEY", "test-only-secret-key")
    return monkeypatch


def load_settings(path: Path = SETTINGS_PATH) -> dict:
    return runpy.run_path(str(path))


def test_defaults(clean_env):
    config = load_settings()

    assert config["DATABASES"]["default"]["ENGINE"] == "django.db.backends.sqlite3"
    assert config["CHANNEL_LAYERS"]["default"]["BACKEND"] == "agentchat.layers.LocalChannelLayer"
    assert config["LLM_PROVIDER"] == "local"
    assert config["LLM_TIMEOUT"] == 60
    assert config["AGENT_MAX_ROUNDS"] == 8
    assert config["CONTEXT_TOKEN_BUDGET"] == 4000
    assert config["DEBUG"] is False
    assert config["SECRET_KEY"] == "test-only-secret-key"


def test_database_url_selects_postgresql(clean_env):
    clean_env.setenv("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/agentchat")

    database = load_settings()["DATABASES"]["default"]

    assert database["ENGINE"] == "django.db.backends.postgresql"
    assert database["NAME"] == "agentchat"
    assert database["HOST"] == "127.0.0.1"
    assert database["PORT"] == 5432
    assert database["USER"] == "postgres"
    assert database["OPTIONS"]["server_side_binding"] is True
    assert database["OPTIONS"]["prepare_threshold"] == 5


def test_prepared_statements_can_be_turned_off_for_a_pooler_that_cannot_keep_them(clean_env):
    clean_env.setenv("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/agentchat")
    clean_env.setenv("DATABASE_PREPARED_STATEMENTS", "0")

    options = load_settings()["DATABASES"]["default"]["OPTIONS"]

    assert options["prepare_threshold"] is None
    assert options["server_side_binding"] is True


def test_server_side_binding_can_be_turned_off_in_the_database_url(clean_env):
    clean_env.setenv("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/agentchat?server_side_binding=false")

    options = load_settings()["DATABASES"]["default"]["OPTIONS"]

    assert options["server_side_binding"] is False
    assert options["pool"]["max_size"] == 16


@pytest.mark.parametrize(
    ("database_url", "redis_url", "on_the_loop"),
    [
        ("", "", True),
        ("", "redis://127.0.0.1:6379/0", False),
        ("postgres://postgres@127.0.0.1:5432/agentchat", "redis://127.0.0.1:6379/0", True),
        ("postgres://postgres@localhost/agentchat", "", True),
        ("postgres://postgres@%2Fvar%2Frun%2Fpostgresql/agentchat", "", True),
        ("postgres://postgres@db.internal:5432/agentchat", "redis://127.0.0.1:6379/0", False),
    ],
)
def test_the_trip_on_the_event_loop_is_on_for_sqlite_alone_and_for_a_postgresql_on_this_machine(
    clean_env, database_url, redis_url, on_the_loop
):
    for name, value in (("DATABASE_URL", database_url), ("REDIS_URL", redis_url)):
        if value:
            clean_env.setenv(name, value)
    assert load_settings()["DATABASE_TRIP_ON_LOOP"] is on_the_loop
    clean_env.setenv("DATABASE_TRIP_ON_LOOP", "0" if on_the_loop else "1")
    assert load_settings()["DATABASE_TRIP_ON_LOOP"] is not on_the_loop


def test_redis_url_selects_channels_redis(clean_env):
    clean_env.setenv("REDIS_URL", "redis://127.0.0.1:6379/0")

    layer = load_settings()["CHANNEL_LAYERS"]["default"]

    assert layer["BACKEND"] == "agentchat.layers.RedisChannelLayer"
    [host] = layer["CONFIG"]["hosts"]
    assert host["address"] == "redis://127.0.0.1:6379/0"
    assert host["retry"].get_retries() == 1  # a connection a Redis restart broke is replaced at once


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("AGENT_MAX_ROUNDS", "abc"),
        ("AGENT_MAX_ROUNDS", "0"),
        ("LLM_TIMEOUT", "-1"),
        ("LLM_TIMEOUT", "soon"),
        ("LLM_TIMEOUT", "inf"),
        ("CONTEXT_TOKEN_BUDGET", "ten"),
        ("DEBUG", "maybe"),
        ("DATABASE_URL", "nosuchdb://x"),
        ("REDIS_URL", "http://x"),
        ("LOG_LEVEL", "LOUD"),
    ],
)
def test_bad_value_is_refused_by_name(clean_env, name, value):
    clean_env.setenv(name, value)

    with pytest.raises(ImproperlyConfigured) as excinfo:
        load_settings()

    assert name in str(excinfo.value)


def test_log_level_ignores_case(clean_env):
    clean_env.setenv("LOG_LEVEL", "warning")
    assert load_settings()["LOGGING"]["root"]["level"] == "WARNING"


def test_generated_secret_key_is_kept_and_reused(clean_env, tmp_path):
    """Without SECRET_KEY a random key is written once under var/ and read back on the next start.

    A copy of settings.py in a temporary project folder makes BASE_DIR (and so var/) point there.
    """
    copy = tmp_path / "agentchat" / "settings.py"
    copy.parent.mkdir()
    shutil.copy(SETTINGS_PATH, copy)
    clean_env.delenv("SECRET_KEY")

    first = load_settings(copy)["SECRET_KEY"]
    second = load_settings(copy)["SECRET_KEY"]

    key_file = tmp_path / "var" / "secret_key"
    assert first == second
    assert len(first) >= 50
    assert key_file.read_text().strip() == first
    assert stat.S_IMODE(key_file.stat().st_mode) == 0o600

    clean_env.setenv("SECRET_KEY", "from-the-environment")
    assert load_settings(copy)["SECRET_KEY"] == "from-the-environment"
