from __future__ import annotations

from pathlib import Path

import pytest
from asgiref.sync import SyncToAsync
from channels.layers import channel_layers
from django.contrib.auth import get_user_model
from django.contrib.auth.management import create_permissions
from django.contrib.auth.models import Permission
from django.contrib.contenttypes.management import create_contenttypes
from django.contrib.contenttypes.models import ContentType
from django.db import connection, connections
from django.db.models.signals import post_migrate
from rest_framework.test import APIClient
from rest_framework_simplejwt.tokens import RefreshToken

from agentchat.agent.providers import ProviderConfig
from conversations.runs import db, loop_trip

from .database_threads import database_threads_connections_closed
from .fake_provider import FakeLLM
from .redis_server import RedisServer, redis_server_binary

EVALUATIONS = Path(__file__).parent / "eval"
CREATE_PERMISSIONS = "django.contrib.auth.management.create_permissions"


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--eval", action="store_true", help="run the embedded model's evaluation, tests/eval (make eval)")


def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    # The evaluation takes minutes on the real model: only `make eval` runs it.
    if collection_path == EVALUATIONS and not config.getoption("--eval"):
        return True
    return None


@pytest.fixture(autouse=True)
def _fast_passwords(settings):
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


@pytest.fixture(autouse=True)
def _fresh_channel_layers():
    """Each test runs in an event loop of its own; a layer's locks and pools belong to the loop that made them."""
    from conversations import runs
    from conversations.runs.control import ControlPlane

    yield
    channel_layers.backends.clear()
    runs.manager.control = ControlPlane()


@pytest.fixture
def alice(db):
    return get_user_model().objects.create_user("alice", "alice@example.com", "alice-password")


@pytest.fixture
def bob(db):
    return get_user_model().objects.create_user("bob", "bob@example.com", "bob-password")


@pytest.fixture
def admin_user(db):
    return get_user_model().objects.create_superuser("admin", "admin@example.com", "admin-password")


def bearer_client(user) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {RefreshToken.for_user(user).access_token}")
    return client


@pytest.fixture
def alice_api(alice) -> APIClient:
    return bearer_client(alice)


@pytest.fixture
def bob_api(bob) -> APIClient:
    return bearer_client(bob)


@pytest.fixture
def anon_api() -> APIClient:
    return APIClient()


@pytest.fixture
def private_redis(tmp_path):
    """A redis-server of the test's own, which it may kill and start again."""
    if redis_server_binary() is None:
        pytest.skip("needs the redis-server program")
    redis = RedisServer(log_dir=tmp_path).start()
    yield redis
    redis.stop()


@pytest.fixture
def fake_llm():
    with FakeLLM() as server:
        yield server


@pytest.fixture
def openai_config(fake_llm):
    return ProviderConfig(
        provider="openai-compatible",
        model="fake-model",
        api_key="sk-test-SECRET-123",
        base_url=fake_llm.base_url,
        timeout=5,
    )


@pytest.fixture(scope="session", autouse=True)
def _thread_connections_closed(django_db_setup):
    """Connections left open in asgiref's sync thread (the fixtures' database work) and in the database threads
    (conversations.runs.db) are closed at the end, with the event loop's own PostgreSQL connection: on PostgreSQL
    they would keep the test database from being dropped. Each database thread takes one of the closings: they
    wait for each other."""
    yield
    if isinstance(db.LOOP, loop_trip.PostgresConnection):
        db.LOOP.close()
    SyncToAsync.single_thread_executor.submit(connections.close_all).result()
    database_threads_connections_closed()


@pytest.fixture(scope="session", autouse=True)
def _flush_puts_back_content_types(django_db_setup, django_db_blocker):
    """After each transactional test Django empties every table, then makes the content types and permissions again
    from the models, app by app: 8% of the tests' own processor time. The rows the migrations made are put
    back as they were instead, with their ids, so ContentType's cache stays right."""
    if connection.settings_dict["NAME"] != connection.creation._get_test_db_name():
        yield  # none of the tests collected uses the database, so pytest-django made no test database
        return
    with django_db_blocker.unblock():
        content_types, permissions = list(ContentType.objects.all()), list(Permission.objects.all())

    def put_back(sender, using, **kwargs) -> None:
        if sender.label == "contenttypes" and not ContentType.objects.using(using).exists():
            ContentType.objects.using(using).bulk_create(content_types)
            Permission.objects.using(using).bulk_create(permissions)

    post_migrate.disconnect(create_contenttypes)
    post_migrate.disconnect(dispatch_uid=CREATE_PERMISSIONS)
    post_migrate.connect(put_back, weak=False)
    yield
    post_migrate.disconnect(put_back)
    post_migrate.connect(create_contenttypes)
    post_migrate.connect(create_permissions, dispatch_uid=CREATE_PERMISSIONS)


def pytest_sessionfinish(session, exitstatus):
    """Django removes a file test database but not SQLite's -wal and -shm files beside it."""
    from django.conf import settings

    name = settings.DATABASES["default"].get("TEST", {}).get("NAME")
    if name and settings.DATABASES["default"]["ENGINE"].endswith("sqlite3"):
        for suffix in ("-wal", "-shm"):
            Path(f"{name}{suffix}").unlink(missing_ok=True)


@pytest.fixture
def llm(settings, fake_llm):
    """The fake provider, configured as the provider of the settings: what runs and /api/agent/chat use."""
    settings.LLM_PROVIDER = "openai-compatible"
    settings.LLM_MODEL = "fake-model"
    settings.LLM_API_KEY = "sk-test-SECRET-123"
    settings.LLM_BASE_URL = fake_llm.base_url
    settings.LLM_TIMEOUT = 5
    return fake_llm
