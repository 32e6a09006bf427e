"""A clean broker for tests that start real workers."""

from __future__ import annotations

from django.conf import settings


def purge_broker_and_cache() -> None:
    """Drop messages and tick markers left by earlier tests (only the test's own Redis DB)."""
    from django.core.cache import cache

    cache.clear()
    if settings.CELERY_BROKER_URL.startswith("redis://"):
        import redis

        redis.Redis.from_url(settings.CELERY_BROKER_URL).flushdb()
