"""The job state machine as data: every allowed move, and nothing else.

`jobs.transitions.transition` is the only code that changes Job.state; it consults
ALLOWED before it touches the database.
"""

from django.db import models


class JobState(models.TextChoices):
    # out of the queue: waits for the jobs it runs after to succeed (services/dependencies.py)
    # or for whoever holds it to release it (services/job_hold.py)
    HELD = "HELD"
    QUEUED = "QUEUED"
    SCHEDULED = "SCHEDULED"
    RUNNING = "RUNNING"
    PREEMPTING = "PREEMPTING"
    LOST = "LOST"
    RETRY_WAIT = "RETRY_WAIT"
    SUCCEEDED = "SUCCEEDED"
    FAILED = "FAILED"
    TIMED_OUT = "TIMED_OUT"
    CANCELLED = "CANCELLED"
    DEAD = "DEAD"


S = JobState
TERMINAL = frozenset({S.SUCCEEDED, S.FAILED, S.TIMED_OUT, S.CANCELLED, S.DEAD})
LIVE = frozenset({S.SCHEDULED, S.RUNNING, S.PREEMPTING})  # states that hold GPUs

ALLOWED: dict[JobState, frozenset[JobState]] = {
    # QUEUED once every job it runs after succeeded and no one holds it; CANCELLED once one
    # ended otherwise
    S.HELD: frozenset({S.QUEUED, S.CANCELLED}),
    S.QUEUED: frozenset({S.SCHEDULED, S.HELD, S.CANCELLED, S.DEAD}),
    # HELD: held before its node started it (services/job_hold.py)
    S.SCHEDULED: frozenset({S.RUNNING, S.HELD, S.LOST, S.CANCELLED, S.FAILED, S.DEAD}),
    # RETRY_WAIT: its attempt failed in a way another try may not (a crash, a hang)
    S.RUNNING: frozenset({S.SUCCEEDED, S.FAILED, S.TIMED_OUT, S.CANCELLED, S.PREEMPTING,
                          S.LOST, S.RETRY_WAIT, S.DEAD}),
    # a victim may finish or fail during its grace period; HELD: it stopped for a hold
    S.PREEMPTING: frozenset({S.QUEUED, S.HELD, S.SUCCEEDED, S.FAILED, S.CANCELLED, S.LOST,
                             S.RETRY_WAIT, S.DEAD}),
    S.LOST: frozenset({S.RETRY_WAIT, S.DEAD}),
    S.RETRY_WAIT: frozenset({S.QUEUED, S.HELD, S.CANCELLED, S.DEAD}),
    S.SUCCEEDED: frozenset(),
    S.FAILED: frozenset(),
    S.TIMED_OUT: frozenset(),
    S.CANCELLED: frozenset(),
    S.DEAD: frozenset(),
}


def is_allowed(src: str, dst: str) -> bool:
    return JobState(dst) in ALLOWED[JobState(src)]
