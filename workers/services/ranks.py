"""The further nodes of a gang that spans nodes: ranks 1, 2, … of one attempt.

Rank 0 is the attempt itself (attempts.py): it moves the job, meters its credits and reports
its outcome, output and checkpoint. A rank starts, renews a lease of its own and hears the
attempt's verdict. A rank that fails on its own (a crash, an OOM, a hang) or runs out of time
ends the whole attempt, since a gang missing a member cannot go on; its other ends, and every
end once the gang was asked to stop, wait for rank 0's report. Rank 0 reports once its other
ranks have ended or their time to stop is over (workers/agent/runner.py), and its report ends
every rank still running. Every call is fenced by the attempt's token, as rank 0's are: a
stale rank can neither start, renew nor report.
"""

from __future__ import annotations

import dataclasses

from django.db import transaction
from django.db.models import QuerySet
from django.utils import timezone

from jobs.models import Attempt, AttemptRank, AttemptStatus, Job
from jobs.scheduler.trigger import request_tick
from jobs.services.release import release_gpus
from jobs.states import TERMINAL
from workers.services.attempts import (
    AttemptClaim,
    AttemptResult,
    StaleAttempt,
    Verdict,
    attempt_finish,
    claim_for,
    copy_kept,
    lease,
    verdict_of,
)
from workers.services.checkpoints import Taken, checkpoint_record

Outcome = Attempt.Outcome
# a rank's own failure, or its share of the time limit spent: the gang cannot finish
# without it (while nobody asked the gang to stop, see rank_finish)
ENDS_THE_GANG = frozenset({Outcome.FAILED, Outcome.OOM, Outcome.TIMED_OUT})


def _live(attempt_id: int, token: int, rank: int) -> QuerySet[AttemptRank]:
    return AttemptRank.objects.filter(attempt_id=attempt_id, rank=rank, ended_at__isnull=True,
                                      attempt__token=token, attempt__ended_at__isnull=True)


def rank_start(*, attempt_id: int, token: int, rank: int) -> AttemptClaim:
    now = timezone.now()
    claimed = _live(attempt_id, token, rank).filter(status=AttemptStatus.SCHEDULED).update(
        status=AttemptStatus.RUNNING, started_at=now, lease_expires_at=now + lease())
    if claimed != 1:
        raise StaleAttempt(f"rank {rank} of attempt {attempt_id} token {token} is not startable")
    row = AttemptRank.objects.select_related("attempt__job", "attempt__node").get(
        attempt_id=attempt_id, rank=rank)
    return claim_for(row.attempt, token, node_rank=rank, node_id=row.node_id,
                     gpu_indices=row.gpu_indices)


def rank_heartbeat(*, attempt_id: int, token: int, rank: int,
                   copied: Taken | None = None) -> Verdict:
    """Renew the rank's lease; answer as the attempt's own heartbeat would (progress is rank
    0's to report). `copied`: a copy of the rank's checkpoint made while it ran, recorded
    for a resume; the copy that completes a step for every node posts the credits of the
    work it keeps (checkpoints.copy_record)."""
    now = timezone.now()
    with transaction.atomic():
        renewed = _live(attempt_id, token, rank).filter(status=AttemptStatus.RUNNING).update(
            lease_expires_at=now + lease())
        if renewed != 1:
            return Verdict("stale")
        if copied and not copy_kept(attempt_id, rank, copied):
            return Verdict("stale")
    return verdict_of(attempt_id, now, node_rank=rank)


def rank_finish(*, attempt_id: int, token: int, rank: int, result: AttemptResult) -> str:
    """Record how the rank's process ended; a failure of its own ends the attempt with it."""
    now = timezone.now()
    with transaction.atomic():
        ended = _live(attempt_id, token, rank).update(
            status=AttemptStatus.ENDED, ended_at=now, outcome=result.outcome,
            exit_code=result.exit_code)
        if ended != 1:
            raise StaleAttempt(f"rank {rank} of attempt {attempt_id} already ended")
        job_id = Attempt.objects.filter(pk=attempt_id).values_list("job_id", flat=True).get()
        checkpoint_record(job_id=job_id, attempt_id=attempt_id, rank=rank,
                          name=result.checkpoint, step=result.checkpoint_step)
        # a gang asked to stop ends as rank 0 reports: a rank that dies as its peers stop
        # (a collective call failing) must not turn a preemption into a failure
        stopping = Attempt.objects.filter(pk=attempt_id).exclude(stop_requested="").exists()
        if result.outcome in ENDS_THE_GANG and not stopping:
            node = AttemptRank.objects.filter(attempt_id=attempt_id, rank=rank).values_list(
                "node__name", flat=True).get()
            tail = f"{result.stderr_tail}\n[rank {rank} of the gang, on {node}, ended it]"
            attempt_finish(attempt_id=attempt_id, token=token,
                           result=dataclasses.replace(result, stderr_tail=tail,
                                                      output_path=None, rank=rank))
    return result.outcome


def rank_free_gpus(*, attempt_id: int, token: int, rank: int) -> bool:
    """Free the rank's GPUs once its binary has ended, ahead of its report, as rank 0 does
    (attempts.attempt_free_gpus): the snapshot leaves the rank out from then on. True if
    freed; a stale token frees nothing."""
    now = timezone.now()
    with transaction.atomic():
        live = _live(attempt_id, token, rank).filter(status=AttemptStatus.RUNNING,
                                                     gpus_freed_at__isnull=True)
        node_id = live.values_list("node_id", flat=True).first()
        if node_id is None or live.update(gpus_freed_at=now) != 1:
            return False
        release_gpus(attempt_id, now, node_id=node_id)
        transaction.on_commit(request_tick)
    return True


def job_is_over(job_id: int) -> bool:
    """The job will run no more: what a rank kept for a resume can go."""
    return Job.objects.filter(pk=job_id, state__in=TERMINAL).exists()


def ranks_running(attempt_id: int) -> int:
    """The attempt's ranks whose process still runs (rank 0 waits for them to end)."""
    return AttemptRank.objects.filter(attempt_id=attempt_id, status=AttemptStatus.RUNNING,
                                      ended_at__isnull=True).count()
