# Over 400 lines: one settings file, so that every setting read from the environment is in one place.
"""AgentChat settings: everything a deployment changes comes from the environment (docs/operations.md)."""

from __future__ import annotations

import base64
import contextlib
import hashlib
import math
import os
import secrets
from datetime import timedelta
from pathlib import Path
from urllib.parse import urlsplit

import dj_database_url
from csp.constants import NONE, SELF, UNSAFE_HASHES
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
    elif config["ENGINE"] == "django.db.backends.postgresql":
        # Each trip to the database borrows a connection and gives it back (Django's own pool over psycopg_pool):
        # opening one would cost more than most trips, and persistent connections do not suit ASGI's threads. A
        # connection is checked as it is lent; while the server is unreachable, a trip waits for it to come back
        # for up to DATABASE_POOL_TIMEOUT, then fails.
        pool = {"min_size": 2, "max_size": 16, "timeout": env_float("DATABASE_POOL_TIMEOUT", 10.0)}
        # Parameters bound by the server, not quoted into the SQL by Python: quoting them cost more than the
        # server's binding. A statement a connection has run five times is prepared, so that PostgreSQL parses and
        # plans it once, not at every run: Django turns psycopg's prepared statements off by default, for poolers
        # that cannot keep them (docs/operations.md, docs/benchmarks.md).
        prepare = {"prepare_threshold": 5 if env_bool("DATABASE_PREPARED_STATEMENTS", True) else None}
        config["OPTIONS"] = {"server_side_binding": True, **prepare, **config.get("OPTIONS", {}), "pool": pool}
        config["CONN_HEALTH_CHECKS"] = True
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

# Threads per process for the sockets' and runs' database work: a trip to PostgreSQL mostly waits for the server.
DATABASE_THREADS = env_int("DATABASE_THREADS", 1 if DATABASES["default"]["ENGINE"].endswith("sqlite3") else 8)

REDIS_URL = env_redis_url("REDIS_URL")
if REDIS_URL:
    from redis.asyncio.retry import Retry
    from redis.backoff import NoBackoff

    CHANNEL_LAYERS = {
        "default": {
            "BACKEND": "agentchat.layers.RedisChannelLayer",
            "CONFIG": {
                "hosts": [
                    {
                        "address": REDIS_URL,
                        # After Redis restarts, each pooled connection fails once: try again on a new one.
                        "retry": Retry(NoBackoff(), 1),
                    }
                ],
            },
        }
    }
else:
    # Room for a whole answer's tokens should a socket fall behind: a full channel drops messages.
    CHANNEL_LAYERS = {"default": {"BACKEND": "agentchat.layers.LocalChannelLayer", "CONFIG": {"capacity": 5000}}}

# A new message's trip to the database taken by the event loop itself, each wait in it bounded: by default where
# the database is SQLite in one process (no Redis), or a PostgreSQL on this machine, whose round trips are short.
DATABASE_TRIP_ON_LOOP = env_bool(
    "DATABASE_TRIP_ON_LOOP",
    not REDIS_URL
    if DATABASES["default"]["ENGINE"].endswith("sqlite3")
    else DATABASES["default"]["HOST"] in {"", "localhost", "127.0.0.1", "::1"}
    or DATABASES["default"]["HOST"].startswith("/"),
)

# Counters every process must agree on (a user's message rate) live in the cache: Redis when there is one.
if REDIS_URL:
    CACHES = {"default": {"BACKEND": "django.core.cache.backends.redis.RedisCache", "LOCATION": REDIS_URL}}
else:
    CACHES = {"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}}

# --- the agent ---------------------------------------------------------------------------------

LLM_PROVIDER = env_str("LLM_PROVIDER", "local")
LLM_MODEL = env_str("LLM_MODEL")
LLM_API_KEY = env_str("LLM_API_KEY")
LLM_BASE_URL = env_str("LLM_BASE_URL")
LLM_TIMEOUT = env_float("LLM_TIMEOUT", 60.0)
# The local model's threads; 0 is every core.
LLM_THREADS = env_int("LLM_THREADS", 0, minimum=0)
AGENT_MAX_ROUNDS = env_int("AGENT_MAX_ROUNDS", 8)
CONTEXT_TOKEN_BUDGET = env_int("CONTEXT_TOKEN_BUDGET", 4000, minimum=256)
# A run whose process stopped refreshing its heartbeat for this long no longer holds the conversation.
RUN_HEARTBEAT_TIMEOUT = timedelta(seconds=env_int("RUN_HEARTBEAT_TIMEOUT", 30))
# How long a dangerous tool call waits for its owner's decision.
CONFIRMATION_TTL = timedelta(seconds=env_int("CONFIRMATION_TTL", 24 * 60 * 60))
# Message frames one user may send per minute, over all their sockets (on every process, with Redis).
WS_MESSAGES_PER_MINUTE = env_int("WS_MESSAGES_PER_MINUTE", 20)
# Chat sockets one user may hold open at once on one process; one more is refused with RATE_LIMITED.
WS_SOCKETS_PER_USER = env_int("WS_SOCKETS_PER_USER", 30)
# Tokens (prompt and completion) one user's answers may cost per day before new runs are refused; unset, no limit.
USER_DAILY_TOKEN_BUDGET = env_int("USER_DAILY_TOKEN_BUDGET", 0) or None

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
# Each uploaded file is read in a child process that is stopped after this many seconds or this much memory;
# each format also has its budget of processor time (tools/documents/limits.py), far below this on a quiet machine.
DOCUMENT_PARSE_TIMEOUT = env_float("DOCUMENT_PARSE_TIMEOUT", 120.0)
DOCUMENT_PARSE_MEMORY_MB = env_int("DOCUMENT_PARSE_MEMORY_MB", 1024, minimum=128)
# Files one user may have being read at once, on all processes together with Redis; one more is refused (429).
UPLOAD_PARSES_PER_USER = env_int("UPLOAD_PARSES_PER_USER", 2, minimum=1)

# --- HTTP services as tools (tools/http; docs/tools.md) ---------------------------

# A JSON list of services, in a file or inline (not both); read and checked by tools.http at start-up.
HTTP_SERVICES_FILE = env_str("HTTP_SERVICES_FILE")
HTTP_SERVICES = env_str("HTTP_SERVICES")
# Lifetime of the identity JWT sent with each call (to services and MCP servers), and of a service token from
# /api/auth/service-token/.
HTTP_IDENTITY_TOKEN_SECONDS = env_int("HTTP_IDENTITY_TOKEN_SECONDS", 60)
SERVICE_TOKEN_DAYS = env_int("SERVICE_TOKEN_DAYS", 30)

# --- MCP servers as tools (tools/mcp; docs/tools.md) ----------------------------

# A JSON list of MCP servers, in a file or inline (not both); read and checked by tools.mcp at start-up.
MCP_SERVERS_FILE = env_str("MCP_SERVERS_FILE")
MCP_SERVERS = env_str("MCP_SERVERS")

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
    "django.forms",
    "channels",
    "rest_framework",
    "rest_framework_simplejwt",
    # before conversations: axes must mark a locked-out sign-in before the audit receiver of the same signal reads it
    "axes",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "django_tasks",
    "django_tasks_db",
    "conversations",
    "tools",
    "tools.dashboards",
    "tools.http",
    "tools.mcp",
    "tools.documents",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "csp.middleware.CSPMiddleware",
    "agentchat.headers.PermissionsPolicyMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.locale.LocaleMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    # last, as axes asks: it turns a locked-out sign-in into the lockout answer (agentchat/lockout.py)
    "axes.middleware.AxesMiddleware",
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
# Widgets are drawn from TEMPLATES, so that templates/ can fix one of the admin's (admin/widgets/).
FORM_RENDERER = "django.forms.renderers.TemplatesSetting"

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

# --- sign-in lockout (django-axes; agentchat/lockout.py, docs/operations.md#sign-in-lockout) -------------

# Failed sign-ins (page or token endpoint) within the cool-off after which one username is refused, even with the
# right password, until the cool-off has passed; one client address gets more, as an office shares one.
LOGIN_FAILURE_LIMIT = env_int("LOGIN_FAILURE_LIMIT", 5)
LOGIN_FAILURE_LIMIT_PER_ADDRESS = env_int("LOGIN_FAILURE_LIMIT_PER_ADDRESS", 20)
LOGIN_LOCKOUT_MINUTES = env_int("LOGIN_LOCKOUT_MINUTES", 15)
# How many proxies in front of daphne append to X-Forwarded-For; 0 counts the connection's own address.
LOGIN_PROXY_COUNT = env_int("LOGIN_PROXY_COUNT", 0, minimum=0)

AUTHENTICATION_BACKENDS = ["axes.backends.AxesStandaloneBackend", "django.contrib.auth.backends.ModelBackend"]
AXES_HANDLER = "agentchat.lockout.LockoutHandler"
AXES_LOCKOUT_PARAMETERS = ["username", "ip_address"]
AXES_FAILURE_LIMIT = LOGIN_FAILURE_LIMIT
AXES_COOLOFF_TIME = timedelta(minutes=LOGIN_LOCKOUT_MINUTES)
# A refused attempt checked no password: it neither counts nor moves the end of the lockout.
AXES_RESET_COOL_OFF_ON_FAILURE_DURING_LOCKOUT = False
# A sign-in clears its username's failures (only those: see LockoutHandler.reset_user_attempts).
AXES_RESET_ON_SUCCESS = True
AXES_CLIENT_IP_CALLABLE = "agentchat.lockout.client_address"
AXES_USERNAME_CALLABLE = "agentchat.lockout.client_username"
AXES_LOCKOUT_CALLABLE = "agentchat.lockout.lockout_response"

LANGUAGE_CODE = "en"
LANGUAGES = [("en", "English"), ("ru", "Русский")]
LOCALE_PATHS = [BASE_DIR / "locale"]
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATICFILES_DIRS = [BASE_DIR / "static"]
# WhiteNoise serves straight from the app folders: no collectstatic step, nothing to keep in sync. Behind nginx,
# `manage.py collectstatic` copies them to STATIC_ROOT for nginx to serve (deploy/nginx.conf.template).
WHITENOISE_USE_FINDERS = True
STATIC_ROOT = env_str("STATIC_ROOT") or None
MEDIA_ROOT = VAR_DIR / "media"

SESSION_COOKIE_HTTPONLY = True
SESSION_COOKIE_SAMESITE = "Lax"
CSRF_COOKIE_SAMESITE = "Lax"
X_FRAME_OPTIONS = "DENY"
SECURE_CONTENT_TYPE_NOSNIFF = True

# --- security headers (docs/operations.md#security-headers) ----------------------------------------


def csp_hash(source: str) -> str:
    return f"'sha256-{base64.b64encode(hashlib.sha256(source.encode()).digest()).decode()}'"


# Only files from this origin run or style the pages: no inline script, no eval, no other hosts. 'self' also
# covers the page's ws:// or wss:// socket to its own host. The only inline styles allowed are the column
# alignments nh3 lets through in Markdown tables (conversations/markdown.py), by hash.
CONTENT_SECURITY_POLICY = {
    "DIRECTIVES": {
        "default-src": [SELF],
        "script-src": [SELF],
        "style-src": [SELF],
        "style-src-attr": [UNSAFE_HASHES, *(csp_hash(f"text-align:{side}") for side in ("left", "center", "right"))],
        "img-src": [SELF, "data:"],
        "connect-src": [SELF],
        "frame-ancestors": [NONE],
        "base-uri": [SELF],
        "form-action": [SELF],
        "object-src": [NONE],
    }
}
# Browser features the app never uses, refused to every page (agentchat/headers.py).
PERMISSIONS_POLICY = [
    "accelerometer", "autoplay", "camera", "display-capture", "geolocation", "gyroscope", "hid",
    "idle-detection", "magnetometer", "microphone", "midi", "payment", "publickey-credentials-get",
    "screen-wake-lock", "serial", "usb", "xr-spatial-tracking",
]  # fmt: skip
# HSTS only reaches browsers over HTTPS, and tells them to refuse plain HTTP to this host for that long: set it
# only where the site is served over HTTPS for good. 0 sends nothing (plain-HTTP `make run`).
SECURE_HSTS_SECONDS = env_int("SECURE_HSTS_SECONDS", 0, minimum=0)
SECURE_HSTS_INCLUDE_SUBDOMAINS = env_bool("SECURE_HSTS_INCLUDE_SUBDOMAINS", False)
SECURE_HSTS_PRELOAD = env_bool("SECURE_HSTS_PRELOAD", False)
# Behind a proxy that terminates TLS daphne sees plain HTTP; a request counts as HTTPS (and so gets HSTS) when
# this header, which the proxy must always set itself, says "https".
_proxy_ssl_header = env_str("SECURE_PROXY_SSL_HEADER")
SECURE_PROXY_SSL_HEADER = (
    ("HTTP_" + _proxy_ssl_header.upper().replace("-", "_"), "https") if _proxy_ssl_header else None
)

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
    # simplejwt's, answering a locked-out client in the one error shape and clearing failures on success
    "TOKEN_OBTAIN_SERIALIZER": "agentchat.lockout.TokenObtainPairSerializer",
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
    # The process's own standard error, not whatever sys.stderr is when the logging is configured: llama.cpp swaps it
    # for /dev/null while it loads the local model (in the background, as the server starts), and a handler made then
    # would write there for good.
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "plain", "stream": "ext://sys.__stderr__"}},
    "root": {"handlers": ["console"], "level": env_choice("LOG_LEVEL", "INFO", {"DEBUG", "INFO", "WARNING", "ERROR"})},
    # axes says at INFO what it does with each sign-in, and the HTTP clients each request they make (a line for every
    # provider call, on the event loop that streams every socket's tokens); their warnings are kept.
    "loggers": {
        "django.db.backends": {"level": "WARNING"},
        **{name: {"level": "WARNING"} for name in ("axes", "httpx", "httpx2")},
    },
}
