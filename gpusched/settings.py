"""Django settings, read from the environment (see the configuration table in README.md)."""

from __future__ import annotations

import sys
from pathlib import Path

from .env import (
    ConfigError,
    database_from_url,
    env_bool,
    env_choice,
    env_int,
    env_number,
    env_str,
)

BASE_DIR = Path(__file__).resolve().parent.parent
VAR_DIR = Path(env_str("GPUSCHED_VAR_DIR", str(BASE_DIR / "var")))

DEV_SECRET_KEY = "dev-only-insecure-key-change-me"

try:
    SECRET_KEY = env_str("SECRET_KEY", DEV_SECRET_KEY)
    DEBUG = env_bool("DEBUG", True)
    if not DEBUG and SECRET_KEY == DEV_SECRET_KEY:  # sessions signed with a published key
        raise ConfigError("SECRET_KEY: set one of your own when DEBUG is false")
    # served over HTTPS (behind a proxy that sets X-Forwarded-Proto): cookies only over it,
    # plain HTTP redirected but for the probes, HSTS for a year
    GPUSCHED_HTTPS = env_bool("GPUSCHED_HTTPS", False)
    DATABASES = {
        "default": database_from_url(
            "DATABASE_URL", env_str("DATABASE_URL", f"sqlite:///{VAR_DIR / 'gpusched.sqlite3'}")
        )
    }
    REDIS_URL = env_str("REDIS_URL", "")
    CELERY_BROKER_URL = env_str("CELERY_BROKER_URL", "filesystem://")
    GPUSCHED_TICK_SECONDS = env_number("GPUSCHED_TICK_SECONDS", 1.0, minimum=0.1)
    # how often the tick publishes every waiting job's place in line (jobs/scheduler/positions.py)
    GPUSCHED_POSITIONS_SECONDS = env_number("GPUSCHED_POSITIONS_SECONDS", 10.0, minimum=0)
    GPUSCHED_HEARTBEAT_SECONDS = env_number("GPUSCHED_HEARTBEAT_SECONDS", 2.0, minimum=0.1)
    GPUSCHED_LEASE_SECONDS = env_number("GPUSCHED_LEASE_SECONDS", 20.0, minimum=1)
    GPUSCHED_NODE_STALE_SECONDS = env_number("GPUSCHED_NODE_STALE_SECONDS", 30.0, minimum=1)
    GPUSCHED_POLICY = env_str("GPUSCHED_POLICY", "gpusched")
    GPUSCHED_USAGE_HALF_LIFE_S = env_number("GPUSCHED_USAGE_HALF_LIFE_S", 6 * 3600.0, minimum=1)
    GPUSCHED_PREEMPT_MIN_RUNTIME_S = env_number("GPUSCHED_PREEMPT_MIN_RUNTIME_S", 60.0)
    GPUSCHED_STARVE_AFTER_S = env_number("GPUSCHED_STARVE_AFTER_S", 12 * 3600.0)  # 0: off
    # a round's first kill may lose this x the GPU-time its preemptor would wait (0: no bound)
    GPUSCHED_FIRST_KILL_LOSS_RATIO = env_number("GPUSCHED_FIRST_KILL_LOSS_RATIO", 16.0)
    # inside a project: enqueued_at + this x time limit orders jobs (0: oldest first)
    GPUSCHED_LIMIT_WEIGHT = env_number("GPUSCHED_LIMIT_WEIGHT", 10.0)
    # plan jobs without the client's estimate by their project's learned run times (off: by
    # their time limits; the statistics are kept either way, docs/policy.md "Run times")
    GPUSCHED_LEARNED_RUN_TIMES = env_bool("GPUSCHED_LEARNED_RUN_TIMES", True)
    # a gang larger than a node runs on nodes of one island (off: every job on one node)
    GPUSCHED_SPAN_NODES = env_bool("GPUSCHED_SPAN_NODES", True)
    # a job that checkpoints starts on a node going into maintenance if it can run this long
    # before the window (it moves then); 0: only jobs whose time limit ends by the window
    GPUSCHED_WINDOW_RUN_S = env_number("GPUSCHED_WINDOW_RUN_S", 600.0)
    GPUSCHED_MAX_GPUS_PER_JOB = env_int("GPUSCHED_MAX_GPUS_PER_JOB", 64, minimum=1)
    # where the nodes of a gang meet: MASTER_ADDR is its first node, MASTER_PORT this plus
    # the index of the first GPU the gang holds there (workers/services/attempts.rendezvous)
    GPUSCHED_RENDEZVOUS_PORT = env_int("GPUSCHED_RENDEZVOUS_PORT", 29500, minimum=1)
    GPUSCHED_DEFAULT_TIME_LIMIT_S = env_int("GPUSCHED_DEFAULT_TIME_LIMIT_S", 3600, minimum=1)
    GPUSCHED_MAX_TIME_LIMIT_S = env_int("GPUSCHED_MAX_TIME_LIMIT_S", 7 * 86400, minimum=1)
    GPUSCHED_MAX_RETRIES = env_int("GPUSCHED_MAX_RETRIES", 3)
    GPUSCHED_RETRY_BACKOFF_S = env_number("GPUSCHED_RETRY_BACKOFF_S", 5.0)
    # a node where this many different jobs failed in a row is cordoned (0: never);
    # workers/services/failing_nodes.py
    GPUSCHED_CORDON_AFTER_FAILURES = env_int("GPUSCHED_CORDON_AFTER_FAILURES", 3)
    # a job's output is deleted this long after it ended (0: kept); jobs/services/outputs.py
    GPUSCHED_OUTPUT_RETENTION_DAYS = env_number("GPUSCHED_OUTPUT_RETENTION_DAYS", 30.0,
                                                minimum=0)
    # a webhook delivery that arrived or was given up is deleted this long after it was made
    # (0: kept); pending ones never are (jobs/services/webhooks.py)
    GPUSCHED_WEBHOOK_RETENTION_DAYS = env_number("GPUSCHED_WEBHOOK_RETENTION_DAYS", 30.0,
                                                 minimum=0)
    # an organization's audit trail (who changed what in it) is deleted this long after each
    # change (0: kept); jobs/services/audit.py
    GPUSCHED_AUDIT_RETENTION_DAYS = env_number("GPUSCHED_AUDIT_RETENTION_DAYS", 0.0, minimum=0)
    # what the binary prints: each stream's last bytes kept per try, published by the node
    # this often while it runs and at its end (workers/agent/logs.py), deleted with outputs
    GPUSCHED_LOG_MAX_BYTES = env_int("GPUSCHED_LOG_MAX_BYTES", 2 * 1024 * 1024, minimum=1024)
    GPUSCHED_LOG_PUBLISH_S = env_number("GPUSCHED_LOG_PUBLISH_S", 15.0, minimum=0.1)
    GPUSCHED_HANG_TIMEOUT_S = env_number("GPUSCHED_HANG_TIMEOUT_S", 300.0, minimum=1)
    GPUSCHED_KILL_GRACE_S = env_number("GPUSCHED_KILL_GRACE_S", 10.0, minimum=0)
    # a running attempt's checkpoints post credits at most this often (its end posts the rest)
    GPUSCHED_METER_INTERVAL_S = env_number("GPUSCHED_METER_INTERVAL_S", 60.0)
    GPUSCHED_WORK_ROOT = Path(env_str("GPUSCHED_WORK_ROOT", str(VAR_DIR / "work")))
    # copy a stopped attempt's checkpoints to storage, so the job resumes on any nodes (off
    # where the work root is storage every node shares; workers/services/checkpoints.py)
    GPUSCHED_STORE_CHECKPOINTS = env_bool("GPUSCHED_STORE_CHECKPOINTS", True)
    # how long a resume reads a stored checkpoint again while storage does not answer
    GPUSCHED_CHECKPOINT_READ_RETRY_S = env_number("GPUSCHED_CHECKPOINT_READ_RETRY_S", 120.0,
                                                  minimum=0)
    # webhooks to loopback, private or link-local addresses (a tenant's URL must not reach
    # the service's own network); on for a fleet whose receivers are all internal
    GPUSCHED_WEBHOOK_ALLOW_PRIVATE = env_bool("GPUSCHED_WEBHOOK_ALLOW_PRIVATE", False)
    # argv template of the model binary; each element is formatted, never given to a shell
    GPUSCHED_BINARY = env_str(
        "GPUSCHED_BINARY",
        f"{sys.executable} -m workers.fakegen --prompt {{prompt}} --output {{output}} "
        "--checkpoint-dir {checkpoint_dir} --seed {seed} --params-file {params_file}",
    )
    # variables of the node worker's environment the binary gets beyond the few it needs
    # (workers/agent/command.py): comma-separated names, or prefixes ending in "*" (HF_HOME,
    # OMP_*); the rest, the service's secrets among them, never reach it
    GPUSCHED_BINARY_ENV_PASS = tuple(
        n.strip() for n in env_str("GPUSCHED_BINARY_ENV_PASS", "").split(",") if n.strip())
    LOG_FORMAT = env_choice("LOG_FORMAT", "plain", ("plain", "json"))
    # password guessing on the dashboard and admin: after this many failed logins for one
    # username, or ten times as many from one address, refuse logins there for the window
    GPUSCHED_LOGIN_MAX_FAILURES = env_int("GPUSCHED_LOGIN_MAX_FAILURES", 10, minimum=1)
    GPUSCHED_LOGIN_WINDOW_S = env_int("GPUSCHED_LOGIN_WINDOW_S", 900, minimum=1)
    # proxies in front that append to X-Forwarded-For (a TLS proxy, a load balancer): the
    # client's address is read that many entries from its end (gpusched/client_address.py)
    GPUSCHED_PROXY_HOPS = env_int("GPUSCHED_PROXY_HOPS", 0)
except ConfigError as exc:  # fail at start, naming the variable
    raise SystemExit(f"gpusched: bad configuration: {exc}") from None

ALLOWED_HOSTS = [h for h in env_str("ALLOWED_HOSTS", "*").split(",") if h]

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "rest_framework",
    "django_celery_beat",
    "jobs",
    "credits",
    "workers",
]

# probes and scrapers on the operators' network speak plain HTTP, HTTPS or not
SECURE_REDIRECT_EXEMPT = [r"^healthz$", r"^readyz$", r"^metrics$", r"^capacity$"]
if GPUSCHED_HTTPS:
    SESSION_COOKIE_SECURE = CSRF_COOKIE_SECURE = True
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
    SECURE_SSL_REDIRECT = True
    SECURE_HSTS_SECONDS = 365 * 86400
    # HSTS for every subdomain, or on the browsers' preload list, binds the whole domain:
    # its owner's choice, made where the domain is served, not this service's
    SILENCED_SYSTEM_CHECKS = ["security.W005", "security.W021"]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "jobs.api.throttles.RateLimitHeaders",
    "gpusched.database_away.DatabaseAwayMiddleware",
]

ROOT_URLCONF = "gpusched.urls"
WSGI_APPLICATION = "gpusched.wsgi.application"
TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
                "jobs.web.context.suspended_organizations",
            ]
        },
    }
]

DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
AUTHENTICATION_BACKENDS = ["gpusched.login_guard.GuardedModelBackend"]
# what a password chosen on the dashboard (an invitation's new account) must pass
AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator",
     "OPTIONS": {"min_length": 10}},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]
LOGIN_REDIRECT_URL = "/dashboard/"
LOGOUT_REDIRECT_URL = "/accounts/login/"
USE_TZ = True
TIME_ZONE = "UTC"
LANGUAGE_CODE = "en-us"
STATIC_URL = "static/"
STATIC_ROOT = VAR_DIR / "static"
MEDIA_ROOT = Path(env_str("GPUSCHED_MEDIA_ROOT", str(VAR_DIR / "media")))
MEDIA_URL = "media/"

if REDIS_URL:
    # a miss, not an error, while Redis is down: the database holds what matters (cache.py)
    CACHES = {"default": {"BACKEND": "gpusched.cache.ForgivingRedisCache",
                          "LOCATION": REDIS_URL}}
else:  # shared between the demo's processes without a server
    CACHES = {"default": {"BACKEND": "django.core.cache.backends.filebased.FileBasedCache",
                          "LOCATION": str(VAR_DIR / "cache")}}

REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": ["jobs.api.auth.ApiKeyAuthentication"],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated",
                                   "jobs.api.scopes.KeyScopePermission"],
    "EXCEPTION_HANDLER": "jobs.api.errors.exception_handler",
    "DEFAULT_PARSER_CLASSES": [
        "jobs.api.parsers.BoundedJSONParser",
        "rest_framework.parsers.FormParser",
        # no multipart: no call takes a file, and a file part is not held to the size limit
    ],
    "DEFAULT_THROTTLE_CLASSES": ["jobs.api.throttles.TierRateThrottle"],
    "UNAUTHENTICATED_USER": None,
    "NUM_PROXIES": GPUSCHED_PROXY_HOPS,  # DRF reads the client's address alike (None: any)
}

# Celery: the broker only carries "run attempt X with token T"; the database decides.
CELERY_BROKER_TRANSPORT_OPTIONS = {"visibility_timeout": 12 * 3600}
if CELERY_BROKER_URL.startswith(("redis://", "rediss://")):
    CELERY_BROKER_TRANSPORT = "gpusched.broker:Transport"  # lives through a Redis restart
if CELERY_BROKER_URL.startswith("filesystem://"):
    _broker_dir = VAR_DIR / "broker"
    for _sub in ("data", "control"):  # the transport expects its folders to exist
        (_broker_dir / _sub).mkdir(parents=True, exist_ok=True)
    CELERY_BROKER_TRANSPORT_OPTIONS = {
        "data_folder_in": str(_broker_dir / "data"),
        "data_folder_out": str(_broker_dir / "data"),
        "control_folder": str(_broker_dir / "control"),
        "store_processed": False,
    }
CELERY_TASK_SERIALIZER = "json"
CELERY_ACCEPT_CONTENT = ["json"]
CELERY_TASK_IGNORE_RESULT = True
CELERY_TASK_DEFAULT_QUEUE = "default"
# webhook posts wait on other people's servers: their own queue and workers, never the tick's
CELERY_TASK_ROUTES = {"jobs.tasks.scheduler_tick": {"queue": "scheduler"},
                      "jobs.tasks.deliver_webhook": {"queue": "notify"},
                      "jobs.tasks.sweep_webhooks": {"queue": "notify"}}
CELERY_WORKER_HIJACK_ROOT_LOGGER = False
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
CELERY_BEAT_SCHEDULER = "django_celery_beat.schedulers:DatabaseScheduler"
# "expire_seconds", not Celery's "expires": the database scheduler stores only that one, and
# sends it as "expires": a round or sweep its worker did not take in time is dropped, not
# run late behind the others
CELERY_BEAT_SCHEDULE = {
    "scheduler-tick": {
        "task": "jobs.tasks.scheduler_tick",
        "schedule": GPUSCHED_TICK_SECONDS,
        "options": {"expire_seconds": max(1, round(10 * GPUSCHED_TICK_SECONDS)),
                    "queue": "scheduler"},
    },
    "credits-expiry": {
        "task": "credits.tasks.expire_credit_buckets",
        "schedule": 300.0,
        "options": {"expire_seconds": 600},
    },
    "credits-allowances": {
        "task": "credits.tasks.grant_allowances",
        "schedule": 600.0,
        "options": {"expire_seconds": 1200},
    },
    "checkpoints-sweep": {
        "task": "workers.tasks.sweep_checkpoints",
        "schedule": 300.0,
        "options": {"expire_seconds": 600},
    },
    "outputs-expiry": {
        "task": "jobs.tasks.expire_outputs",
        "schedule": 3600.0,
        "options": {"expire_seconds": 3600},
    },
    "content-erasure": {
        "task": "jobs.tasks.erase_due_content",
        "schedule": 300.0,
        "options": {"expire_seconds": 600},
    },
    "webhooks-sweep": {
        "task": "jobs.tasks.sweep_webhooks",
        "schedule": 30.0,
        "options": {"expire_seconds": 60, "queue": "notify"},
    },
}

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"plain": {"format": "%(asctime)s %(levelname)s %(name)s %(message)s"},
                   "json": {"()": "gpusched.logs.JsonFormatter"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": LOG_FORMAT}},
    "root": {"handlers": ["console"], "level": env_str("LOG_LEVEL", "INFO")},
}
