"""One tick at a time, across every scheduler process."""

from __future__ import annotations

import contextlib
import fcntl
from collections.abc import Iterator

from django.conf import settings
from django.db import connection

# Arbitrary constant naming "the scheduler tick" in pg_advisory locks.
TICK_LOCK_KEY = 0x67707573  # "gpus"


@contextlib.contextmanager
def tick_lock() -> Iterator[bool]:
    """Yield True if this process holds the tick lock, False if another tick runs."""
    if connection.vendor == "postgresql":
        with connection.cursor() as cur:
            # Session lock, released below: two ticks must never decide on the same free GPUs.
            cur.execute("SELECT pg_try_advisory_lock(%s)", [TICK_LOCK_KEY])
            got = cur.fetchone()[0]
        try:
            yield got
        finally:
            if got:
                with connection.cursor() as cur:
                    cur.execute("SELECT pg_advisory_unlock(%s)", [TICK_LOCK_KEY])
        return
    # SQLite (the demo): an exclusive file lock next to the database does the same.
    settings.VAR_DIR.mkdir(parents=True, exist_ok=True)
    with open(settings.VAR_DIR / "tick.lock", "w") as fh:
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            yield False
            return
        try:
            yield True
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)
