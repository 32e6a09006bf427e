"""The node agent against a database that does not answer for a while: a failover, a
restarted connection pooler, a network blip. Without this, one heartbeat's error ended
the supervision of a running binary: its try was lost and run again elsewhere while the
binary ran on, unsupervised, on GPUs the scheduler had given to another job.

A failed call is logged, the broken connection closed (the next call opens a new one) and
tried again: a heartbeat at the next beat, while supervision goes on; an attempt's start and
end every second for as long as a lease lasts. An end whose copy of the output failed (a
full disk, a storage that did not answer) is tried again the same way, rather than leave its
try to be lost with its lease and run again from the start. The lease bounds it all: a try
whose lease ran out meanwhile is lost, and the agent hears so ("stale") at its first answer.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import TypeVar

from django.conf import settings
from django.db import InterfaceError, OperationalError, connections

log = logging.getLogger(__name__)
T = TypeVar("T")
RETRY_EVERY_S = 1.0
# a connection cut or refused (OperationalError), or one used after it broke (InterfaceError,
# not a DatabaseError under PEP 249); not an error in the query or the data
UNANSWERED = (OperationalError, InterfaceError)


def _unanswered(what: str, attempt_id: int) -> None:
    log.warning("%s of attempt %s: the database did not answer", what, attempt_id,
                exc_info=True, extra={"attempt_id": attempt_id})
    connections.close_all()  # a broken connection is not reused: the next call reconnects


def answer_or_none(call: Callable[[], T], what: str, attempt_id: int) -> T | None:
    """`call`'s answer, or None when the database did not answer."""
    try:
        return call()
    except UNANSWERED:
        _unanswered(what, attempt_id)
        return None


def answer_within_a_lease(call: Callable[[], T], what: str, attempt_id: int, *,
                          also: tuple[type[Exception], ...] = ()) -> T:
    """`call`'s answer, tried again every second while the database does not answer (or
    `call` raises one of `also`), for a lease's length at most (then its error goes up)."""
    deadline = time.monotonic() + settings.GPUSCHED_LEASE_SECONDS
    while True:
        try:
            return call()
        except (*UNANSWERED, *also) as exc:
            if time.monotonic() >= deadline:
                raise
            if isinstance(exc, UNANSWERED):
                _unanswered(what, attempt_id)
            else:
                log.warning("%s of attempt %s failed; trying again", what, attempt_id,
                            exc_info=True, extra={"attempt_id": attempt_id})
            time.sleep(RETRY_EVERY_S)
