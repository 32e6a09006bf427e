"""Racing callers: threads released together, each with its own database connection."""

from __future__ import annotations

import threading
from collections.abc import Callable

from django.db import connection


def race(fn: Callable[[], object], count: int) -> None:
    """Run `fn` in `count` threads that start at once; wait for all of them."""
    barrier = threading.Barrier(count)

    def body() -> None:
        barrier.wait()
        try:
            fn()
        finally:
            connection.close()

    threads = [threading.Thread(target=body) for _ in range(count)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
