"""Read settings from the environment; a bad value stops the start with its variable's name."""

from __future__ import annotations

import os
from urllib.parse import unquote, urlparse


class ConfigError(Exception):
    pass


def env_str(name: str, default: str) -> str:
    return os.environ.get(name, default)


def env_choice(name: str, default: str, choices: tuple[str, ...]) -> str:
    value = os.environ.get(name) or default
    if value not in choices:
        raise ConfigError(f"{name}={value!r} is not one of {', '.join(choices)}")
    return value


def env_bool(name: str, default: bool) -> bool:
    raw = os.environ.get(name)
    if raw is None or raw == "":
        return default
    value = raw.strip().lower()
    if value in ("1", "true", "yes", "on"):
        return True
    if value in ("0", "false", "no", "off"):
        return False
    raise ConfigError(f"{name}={raw!r} is not a boolean (use true/false)")


def env_number(name: str, default: float, *, minimum: float = 0, cast: type = float) -> float:
    raw = os.environ.get(name)
    if raw is None or raw == "":
        return default
    try:
        value = cast(raw)
    except ValueError:
        raise ConfigError(f"{name}={raw!r} is not a {cast.__name__}") from None
    if value < minimum:
        raise ConfigError(f"{name}={raw!r} must be at least {minimum}")
    return value


def env_int(name: str, default: int, *, minimum: int = 0) -> int:
    return int(env_number(name, default, minimum=minimum, cast=int))


# A database that stops answering without refusing (a failover, a partition dropping
# packets) must fail a call, not hang it: a node's supervise loop heartbeats through it, and
# its time limits and kills wait on each call (docs/nodes.md, "Failures"). libpq gives up a
# connection that has not answered its start in 5 s, or whose sent bytes go unacknowledged
# for 30 s, and probes an idle one every 10 s after 30 s. None of these ends a long query.
POSTGRES_TIMEOUTS = {"connect_timeout": 5, "tcp_user_timeout": 30_000, "keepalives": 1,
                     "keepalives_idle": 30, "keepalives_interval": 10, "keepalives_count": 3}


def database_from_url(name: str, url: str) -> dict:
    """Django DATABASES entry from a postgres:// or sqlite:/// URL."""
    parsed = urlparse(url)
    if parsed.scheme == "sqlite":
        # sqlite:///relative/path or sqlite:////absolute/path
        path = parsed.path[1:]
        return {
            "ENGINE": "django.db.backends.sqlite3",
            "NAME": path or ":memory:",
            # IMMEDIATE: writers queue for the lock instead of failing on upgrade;
            # WAL: the web app, the scheduler and the node workers read while one writes.
            "OPTIONS": {
                "timeout": 30,
                "transaction_mode": "IMMEDIATE",
                "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
            },
        }
    if parsed.scheme in ("postgres", "postgresql"):
        return {
            "ENGINE": "django.db.backends.postgresql",
            "NAME": unquote(parsed.path.lstrip("/")),
            "USER": unquote(parsed.username or ""),
            "PASSWORD": unquote(parsed.password or ""),
            "HOST": parsed.hostname or "",
            "PORT": str(parsed.port or ""),
            "CONN_MAX_AGE": 60,
            "OPTIONS": dict(POSTGRES_TIMEOUTS),
        }
    raise ConfigError(f"{name}={url!r}: scheme must be postgres:// or sqlite:///")
