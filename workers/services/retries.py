"""An attempt that ends without its job's fault being sure ends the attempt, not the job: the
job waits (RETRY_WAIT), backing off, and goes back to the queue to resume from its last
checkpoint. That is so for a lost node (reaper.py), a crash, a hang or a broken output
(workers/agent/outcome.py, `retryable`), and an OOM where GPUs with more memory could take
the job. Past its retries (its `max_retries`, at most GPUSCHED_MAX_RETRIES) the job is
dead-lettered (DEAD), so one poison job cannot take node after node; a failure the binary
blames on its input ends the job FAILED at once.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from django.conf import settings
from django.db import transaction
from django.db.models import Sum

from jobs.metrics import count_failure
from jobs.models import Attempt, AttemptRank, Job
from jobs.states import LIVE, JobState
from jobs.transitions import transition
from workers.agent.outcome import failure_kind, retryable
from workers.models import Node, NodeState
from workers.services.failing_nodes import failing_node, note_failure


def retry_delay(retries: int) -> timedelta:
    """Backoff before retry number `retries` + 1: base, 2×base, 4×base … capped at 10 min."""
    return timedelta(seconds=min(600.0, settings.GPUSCHED_RETRY_BACKOFF_S * 2**retries))


def retry_budget(job: Job) -> int:
    """The retries the job may have: its own number, at most the service's."""
    most = settings.GPUSCHED_MAX_RETRIES
    return most if job.max_retries is None else min(job.max_retries, most)


def retry_or_dead_letter(job: Job, attempt: Attempt, now: datetime, *, why: str,
                         error: str = "", data: dict | None = None, **fields) -> None:
    """Send the job to wait for its next try, or to the dead letters once its retries are
    spent. `why` says what ended the attempt, `error` what it printed; `fields` change the
    job's request for the retry (written only if it retries)."""
    budget = retry_budget(job)
    if job.retries >= budget:
        tries = job.retries + 1
        text = f"{tries} attempts ended without a result; the last: {why}"
        transition(job, JobState.DEAD, attempt=attempt, finished_at=now, data=data,
                   reason=f"{why}; retries exhausted ({job.retries})",
                   error_code="retries_exhausted", error=f"{text}\n{error}".strip())
        return
    transition(job, JobState.RETRY_WAIT, attempt=attempt, data=data, retries=job.retries + 1,
               retry_at=now + retry_delay(job.retries), **fields,
               reason=f"{why}; retry {job.retries + 1} of {budget}")


def retry_unstarted(job: Job, attempt: Attempt, now: datetime) -> None:
    """Queue again, at once and without counting a retry, a job whose node never started it
    within its lease: its worker's slots were all taken (a stopped try copying its
    checkpoint after it freed its GPUs early), it was down, or the message never reached
    it. The binary did not run, so this is no poison job's; it goes to another node."""
    node = Node.objects.filter(pk=attempt.node_id).values_list("name", flat=True).first()
    transition(job, JobState.RETRY_WAIT, attempt=attempt, retry_at=now, avoid_node=node or "",
               reason=f"{node} never started it (lease expired); queued again, no retry "
                      f"counted")


def settle_failed_try(job: Job, attempt: Attempt, *, outcome: str, error_code: str,
                      exit_code: int | None, error: str, rank: int = 0) -> bool:
    """Count the attempt's failure (on the node of its gang's `rank`, once it commits), and
    retry its job if the job is live and another try may succeed (or dead-letter it once its
    retries are spent); False where the failure ends the job."""
    kind = failure_kind(outcome=outcome, error_code=error_code, exit_code=exit_code)
    transaction.on_commit(lambda: count_failure(kind))
    if job.state not in LIVE:
        return False
    data = {"error_code": error_code, "exit_code": exit_code}
    why = f"attempt failed: {error_code}"
    if retryable(outcome=outcome, error_code=error_code, exit_code=exit_code):
        avoid = ""
        if not attempt.stop_requested:  # one that failed as it was stopped: not the node's
            node_id = failing_node(attempt, rank)
            note_failure(attempt, node_id)
            avoid = Node.objects.filter(pk=node_id).values_list("name", flat=True).get()
        retry_or_dead_letter(job, attempt, attempt.ended_at, why=why, error=error, data=data,
                             avoid_node=avoid)
        return True
    floor = _more_memory_floor(job, attempt) if outcome == Attempt.Outcome.OOM else None
    if floor is None:
        return False
    data["changed"] = {"min_gpu_memory_mb": [job.min_gpu_memory_mb, floor]}
    retry_or_dead_letter(job, attempt, attempt.ended_at, why=f"{why}; it asks for GPUs of "
                         f"more than {floor - 1} MiB now", error=error, data=data,
                         min_gpu_memory_mb=floor)
    return True


def _more_memory_floor(job: Job, attempt: Attempt) -> int | None:
    """The memory floor that keeps the job off GPUs like those it ran out of memory on, if
    GPUs with more that it may use could ever hold it; None where none could (or the
    memory of its GPUs is not known)."""
    ran_on = min(Node.objects.filter(pk__in=_attempt_nodes(attempt)).values_list(
        "gpu_memory_mb", flat=True), default=0)
    if not ran_on:
        return None
    bigger = Node.objects.exclude(state=NodeState.DOWN).filter(gpu_memory_mb__gt=ran_on)
    if job.gpu_types:
        bigger = bigger.filter(gpu_type__in=job.gpu_types)
    if job.region:
        bigger = bigger.filter(region=job.region)
    # a gang larger than a node spans nodes of one island alike in type, memory and region
    alike = bigger.exclude(island="").values("island", "gpu_type", "gpu_memory_mb", "region")
    fits = bigger.filter(gpu_count__gte=job.gpus).exists() or alike.annotate(
        gpus=Sum("gpu_count")).filter(gpus__gte=job.gpus).exists()
    return ran_on + 1 if fits else None


def _attempt_nodes(attempt: Attempt) -> set[int]:
    ranks = AttemptRank.objects.filter(attempt=attempt).values_list("node_id", flat=True)
    return {attempt.node_id, *ranks}
