"""Redis as a cache the service does without while Redis is down.

What the service keeps in its cache is a copy or a hint: the scheduler's published backlog,
queue positions and capacity advice, throttle and login counters, metrics counters. The
database holds every job, credit and binding. So while Redis does not answer, a read is a
miss, a write is dropped and an `add` adds nothing (a lock taken through it is not taken):
the API keeps taking and answering jobs, a node's report of a try's end is not failed by a
counter, and /readyz names the cache as degraded. A call gives up after a second on a host that
does not answer, instead of hanging the request.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any, TypeVar

from django.core.cache.backends.base import DEFAULT_TIMEOUT
from django.core.cache.backends.redis import RedisCache
from redis.backoff import NoBackoff
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError
from redis.retry import Retry

log = logging.getLogger(__name__)
T = TypeVar("T")
CONNECT_TIMEOUT_S = 1.0  # a host that does not answer at all
ANSWER_TIMEOUT_S = 5.0  # a server that took the call: a round's positions are large
WARN_EVERY_S = 10.0  # one warning this often while Redis is down, not one a call
_DOWN = (RedisConnectionError, RedisTimeoutError)


class ForgivingRedisCache(RedisCache):
    def __init__(self, server: str, params: dict) -> None:
        options = params.setdefault("OPTIONS", {})
        options.setdefault("socket_connect_timeout", CONNECT_TIMEOUT_S)
        options.setdefault("socket_timeout", ANSWER_TIMEOUT_S)
        options.setdefault("retry", Retry(NoBackoff(), 1))  # once: a connection cut under it
        super().__init__(server, params)
        self._warned_at = -WARN_EVERY_S

    def _or(self, fallback: T, call: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        try:
            return call(*args, **kwargs)
        except _DOWN:
            if time.monotonic() - self._warned_at >= WARN_EVERY_S:
                self._warned_at = time.monotonic()
                log.warning("the cache (Redis) does not answer; going on without it",
                            exc_info=True)
            return fallback

    def get(self, key, default=None, version=None):
        return self._or(default, super().get, key, default, version)

    def get_many(self, keys, version=None):
        return self._or({}, super().get_many, keys, version)

    def has_key(self, key, version=None):
        return self._or(False, super().has_key, key, version)

    def add(self, key, value, timeout=DEFAULT_TIMEOUT, version=None):
        return self._or(False, super().add, key, value, timeout, version)

    def set(self, key, value, timeout=DEFAULT_TIMEOUT, version=None):
        return self._or(None, super().set, key, value, timeout, version)

    def set_many(self, data, timeout=DEFAULT_TIMEOUT, version=None):
        return self._or(list(data), super().set_many, data, timeout, version)

    def touch(self, key, timeout=DEFAULT_TIMEOUT, version=None):
        return self._or(False, super().touch, key, timeout, version)

    def incr(self, key, delta=1, version=None):
        return self._or(delta, super().incr, key, delta, version)

    def delete(self, key, version=None):
        return self._or(False, super().delete, key, version)

    def delete_many(self, keys, version=None):
        return self._or(None, super().delete_many, keys, version)

    def clear(self):
        return self._or(False, super().clear)
