"""AgentChat settings: everything a deployment changes comes from the environment (docs/operations.md)."""

from __future__ import annotations

import contextlib
import math
import os
import secrets
from datetime import timedelta
from pathlib import Path
from urllib.parse import urlsplit

import dj_database_url
from django.core.exceptions import ImproperlyConfigured

BASE_DIR = Path(__file__).resolve().parent.parent
VAR_DIR = BASE_DIR / "var"


def env_str(name: str, default: str = "") -> str:
    return os.environ.get(name, default).strip()


def env_bool(name: str, default: bool) -> bool:
    raw = env_str(name).lower()
    if not raw:
        return default
    if raw in {"1", "true", "yes", "on"}:
        return True
    if raw in {"0", "false", "no", "off"}:
        return False
    raise ImproperlyConfigured(f"{name} must be a boolean (1/0, true/false, yes/no, on/off), got {raw!r}")


def env_int(name: str, default: int, *, minimum: int = 1) -> int:
    raw = env_str(name)
    if not raw:
        return default
    try:
        value = int(raw)
    except ValueError:
        raise ImproperlyConfigured(f"{name} must be a whole number, got {raw!r}") from None
    if value < minimum:
        raise ImproperlyConfigured(f"{name} must be at least {minimum}, got {value}")
    return value


def env_float(name: str, default: float) -> float:
    raw = env_str(name)
    if not raw:
        return default
    try:
        value = float(raw)
    except ValueError:
        raise ImproperlyConfigured(f"{name} must be a number of seconds, got {raw!r}") from None
    if not (value > 0 and math.isfinite(value)):
        raise ImproperlyConfigured(f"{name} must be a finite number greater than 0, got {raw!r}")
    return value


def env_list(name: str, default: list[str]) -> list[str]:
    raw = env_str(name)
    if not raw:
        return default
    return [item.strip() for item in raw.split(",") if item.strip()]


def env_choice(name: str, default: str, choices: set[str]) -> str:
    """One of `choices`, matched without regard to case."""
    value = env_str(name, default)
    match = {choice.casefold(): choice for choice in choices}.get(value.casefold())
    if match is None:
        raise ImproperlyConfigured(f"{name} must be one of {', '.join(sorted(choices))}, got {value!r}")
    return match


def env_database(name: str, default: str) -> dict:
    raw = env_str(name) or default
    try:
        config = dj_database_url.parse(raw, conn_max_age=0)
    except Exception as exc:  # dj-database-url raises ValueError, KeyError… for unusable URLs
        raise ImproperlyConfigured(f"{name} is not a database URL dj-database-url understands: {exc}") from None
    if config["ENGINE"] == "django.db.backends.sqlite3":
        # Opening a SQLite file is most of the cost of a short query; its connections are kept.
        config["CONN_MAX_AGE"] = None
        # WAL and IMMEDIATE transactions let the socket threads and the API write side by side.
        config["OPTIONS"] = {
            "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
            "transaction_mode": "IMMEDIATE",
            "timeout": 20,
        }
    return config


def env_redis_url(name: str) -> str:
    raw = env_str(name)
    if raw and urlsplit(raw).scheme not in {"redis", "rediss", "unix"}:
        raise ImproperlyConfigured(
            f"{name} must be a redis://, rediss:// or unix:// URL, got scheme {urlsplit(raw).scheme!r}"
        )
    return raw


def secret_key() -> str:
    """The SECRET_KEY variable, or a random key kept in var/ so sessions survive restarts of `make run`."""
    key = env_str("SECRET_KEY")
    if key:
        return key
    key_file = VAR_DIR / "secret_key"
    if not key_file.exists():
        VAR_DIR.mkdir(exist_ok=True)
        draft = VAR_DIR / f"secret_key.{os.getpid()}"
        draft.touch(mode=0o600)
        draft.write_text(secrets.token_urlsafe(50))
        # link() is atomic and refuses to replace: when several processes start at once, the first key wins.
        with contextlib.suppress(FileExistsError):
            os.link(draft, key_file)
        draft.unlink()
    return key_file.read_text().strip()


# --- deployment --------------------------------------------------------------------------------

DEBUG = env_bool("DEBUG", False)
SECRET_KEY = secret_key()
ALLOWED_HOSTS = env_list("ALLOWED_HOSTS", ["127.0.0.1", "localhost", "[::1]"])
CSRF_TRUSTED_ORIGINS = env_list("CSRF_TRUSTED_ORIGINS", [])

DATABASES = {"default": env_database("DATABASE_URL", f"sqlite:///{BASE_DIR / 'db.sqlite3'}")}
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    # Tests get a file, one per test process, rather than memory: the daphne processes they start must open it.
    DATABASES["default"]["TEST"] = {"NAME": str(VAR_DIR / f"test-{os.getpid()}.sqlite3")}
    VAR_DIR.mkdir(exist_ok=True)

REDIS_URL = env_redis_url("REDIS_URL")
if REDIS_URL:
    from redis.asyncio.retry import Retry
    from redis.backoff import NoBackoff

    CHANNEL_LAYERS = {
        "default": {
            "BACKEND": "channels_redis.core.RedisChannelLayer",
            "CONFIG": {
                "hosts": [
                    {
                        "address": REDIS_URL,
                        # redis-py's 5 s read timeout would fire during channels_redis's own 5 s blocking reads.
                        "socket_timeout": 30,
                        # After Redis restarts, each pooled connection fails once: try again on a new one.
                        "retry": Retry(NoBackoff(), 1),
                    }
                ],
                "capacity": 5000,
                "expiry": 30,
            },
        }
    }
else:
    # Room for a whole answer's tokens should a socket fall behind: a full channel drops messages.
    CHANNEL_LAYERS = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer", "CONFIG": {"capacity": 5000}}}

# --- the agent ---------------------------------------------------------------------------------

LLM_PROVIDER = env_str("LLM_PROVIDER", "local")
LLM_MODEL = env_str("LLM_MODEL")
LLM_API_KEY = env_str("LLM_API_KEY")
LLM_BASE_URL = env_str("LLM_BASE_URL")
LLM_TIMEOUT = env_float("LLM_TIMEOUT", 60.0)
AGENT_MAX_ROUNDS = env_int("AGENT_MAX_ROUNDS", 8)
CONTEXT_TOKEN_BUDGET = env_int("CONTEXT_TOKEN_BUDGET", 4000, minimum=256)
# A run whose process stopped refreshing its heartbeat for this long no longer holds the conversation.
RUN_HEARTBEAT_TIMEOUT = timedelta(seconds=env_int("RUN_HEARTBEAT_TIMEOUT", 30))
# How long a dangerous tool call waits for its owner's decision.
CONFIRMATION_TTL = timedelta(seconds=env_int("CONFIRMATION_TTL", 24 * 60 * 60))
# Message frames one user may send per minute, over all their sockets on one process.
WS_MESSAGES_PER_MINUTE = env_int("WS_MESSAGES_PER_MINUTE", 20)

# --- slow tools as background jobs (docs/background-jobs.md) -------------------------------------------

# django-tasks with its database backend: the queue is a table, so the default SQLite setup needs no broker.
TASKS = {"default": {"BACKEND": "django_tasks_db.DatabaseBackend", "QUEUES": ["tools"]}}
# A job whose worker stopped refreshing its heartbeat for this long is taken as lost: retried or failed.
JOB_HEARTBEAT_TIMEOUT = timedelta(seconds=env_int("JOB_HEARTBEAT_TIMEOUT", 30))
# How many times a lost job of a tool that needs no confirmation runs in all; a confirmed call never runs twice.
JOB_MAX_ATTEMPTS = env_int("JOB_MAX_ATTEMPTS", 2)

# --- files (tools/documents; docs/tools.md) ------------------------------------------------------

# 1: a message's images reach the model as image parts (for vision-capable models); 0: as a description.
LLM_VISION = env_bool("LLM_VISION", False)
# Each uploaded file is read in a child process that is stopped after this many seconds or this much memory.
DOCUMENT_PARSE_TIMEOUT = env_float("DOCUMENT_PARSE_TIMEOUT", 60.0)
DOCUMENT_PARSE_MEMORY_MB = env_int("DOCUMENT_PARSE_MEMORY_MB", 1024, minimum=128)

# --- HTTP services as tools (tools/http; docs/tools.md) ---------------------------

# A JSON list of services, in a file or inline (not both); read and checked by tools.http at start-up.
HTTP_SERVICES_FILE = env_str("HTTP_SERVICES_FILE")
HTTP_SERVICES = env_str("HTTP_SERVICES")
# Lifetime of the identity JWT sent with each call, and of a service token from /api/auth/service-token/.
HTTP_IDENTITY_TOKEN_SECONDS = env_int("HTTP_IDENTITY_TOKEN_SECONDS", 60)
SERVICE_TOKEN_DAYS = env_int("SERVICE_TOKEN_DAYS", 30)

# --- Django ------------------------------------------------------------------------------------

INSTALLED_APPS = [
    "daphne",
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "whitenoise.runserver_nostatic",
    "django.contrib.staticfiles",
    "channels",
    "rest_framework",
    "rest_framework_simplejwt",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "django_tasks",
    "django_tasks_db",
    "conversations",
    "tools",
    "tools.dashboards",
    "tools.http",
    "tools.documents",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.locale.LocaleMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
]

ROOT_URLCONF = "agentchat.urls"
ASGI_APPLICATION = "agentchat.asgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.template.context_processors.i18n",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]

DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]
LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "home"
LOGOUT_REDIRECT_URL = "login"

LANGUAGE_CODE = "en"
LANGUAGES = [("en", "English"), ("ru", "Русский")]
LOCALE_PATHS = [BASE_DIR / "locale"]
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATICFILES_DIRS = [BASE_DIR / "static"]
# WhiteNoise serves straight from the app folders: no collectstatic step, nothing to keep in sync.
WHITENOISE_USE_FINDERS = True
MEDIA_ROOT = VAR_DIR / "media"

SESSION_COOKIE_HTTPONLY = True
SESSION_COOKIE_SAMESITE = "Lax"
CSRF_COOKIE_SAMESITE = "Lax"
X_FRAME_OPTIONS = "DENY"
SECURE_CONTENT_TYPE_NOSNIFF = True

REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "rest_framework_simplejwt.authentication.JWTAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    "DEFAULT_PAGINATION_CLASS": "conversations.api.pagination.PageNumberPagination",
    "DEFAULT_RENDERER_CLASSES": [
        "rest_framework.renderers.JSONRenderer",
        "rest_framework.renderers.BrowsableAPIRenderer",
    ],
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    "EXCEPTION_HANDLER": "agentchat.errors.api_exception_handler",
}

SIMPLE_JWT = {
    "ACCESS_TOKEN_LIFETIME": timedelta(minutes=env_int("JWT_ACCESS_MINUTES", 15)),
    "REFRESH_TOKEN_LIFETIME": timedelta(days=env_int("JWT_REFRESH_DAYS", 7)),
    "UPDATE_LAST_LOGIN": True,
}

SPECTACULAR_SETTINGS = {
    "TITLE": "AgentChat API",
    "DESCRIPTION": "Conversations with an agent that acts. Every error has the shape {error, code}.",
    "VERSION": "1.0.0",
    "SERVE_INCLUDE_SCHEMA": False,
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    "COMPONENT_SPLIT_REQUEST": True,
}

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"plain": {"format": "%(asctime)s %(levelname)s %(name)s: %(message)s"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "plain"}},
    "root": {"handlers": ["console"], "level": env_choice("LOG_LEVEL", "INFO", {"DEBUG", "INFO", "WARNING", "ERROR"})},
    "loggers": {"django.db.backends": {"level": "WARNING"}},
}
