"""A node that fails the jobs it runs is taken out of service before it spends them all.

A node with a bad GPU, a broken driver or a full disk fails every job it gets, and fails it
fast, so it draws job after job and spends their retries. Where the attempts of
GPUSCHED_CORDON_AFTER_FAILURES different jobs failed in a row on a node (crashes, hangs,
broken outputs: failures another try may not repeat) while, since the first of them, other
nodes ran at least as many attempts to their end as failed there, the node is at fault:
- where every one of those attempts ran on some GPU of the node, and not on all of them,
  those GPUs are taken out of service (a GPU fault is most often one GPU's), unless the
  scheduler took one of the node's out before: the fault then outlived the GPU, and
- otherwise the node is cordoned with its reason.
An operator returns either to service once it is mended. A failure everywhere at once (a bad
release of the binary) takes nothing out: the fault is not the nodes'.
"""

from __future__ import annotations

import logging
from datetime import datetime

from django.conf import settings
from django.db.models import Q

from jobs.models import Attempt, AttemptRank
from workers.models import Gpu, Node, NodeState
from workers.services.nodes import OPERATOR

log = logging.getLogger(__name__)
# its GPUs' marks: the node's readings leave them, as they leave an operator's
SCHEDULER = f"{OPERATOR} the scheduler"


def failing_node(attempt: Attempt, rank: int) -> int:
    """The node whose binary ended the attempt: rank 0's, or a gang's failing rank's."""
    if rank == 0:
        return attempt.node_id
    return AttemptRank.objects.filter(attempt=attempt, rank=rank).values_list(
        "node_id", flat=True).get()


def note_failure(attempt: Attempt, node_id: int) -> None:
    """Record that the attempt failed on the node; take the GPUs it fails on, or the node,
    out of service if it fails job after job."""
    Attempt.objects.filter(pk=attempt.pk).update(failed_on_id=node_id)
    limit = settings.GPUSCHED_CORDON_AFTER_FAILURES
    streak = _jobs_failed_in_a_row(node_id, limit) if limit > 0 else None
    if streak is None:
        return
    failed, attempts = streak
    if not _fine_elsewhere(node_id, since=min(failed.values())):
        return
    jobs = ", ".join(str(job) for job in sorted(failed))
    reason = f"the attempts of {limit} jobs failed in a row here (jobs {jobs})"
    gpus = _shared_gpus(node_id, attempts)
    if gpus and not Gpu.objects.filter(node_id=node_id, health_reason__startswith=SCHEDULER
                                       ).exists():
        Gpu.objects.filter(node_id=node_id, index__in=gpus).update(
            health=Gpu.Health.UNHEALTHY, health_reason=f"{SCHEDULER}: {reason}"[:200])
        log.warning("node %s: GPUs %s taken out: %s", node_id, sorted(gpus), reason,
                    extra={"node_id": node_id})
        return
    if Node.objects.filter(pk=node_id, state=NodeState.ACTIVE).update(
            state=NodeState.CORDONED, state_reason=reason[:200]):
        log.warning("node %s cordoned: %s", node_id, reason, extra={"node_id": node_id})


def _shared_gpus(node_id: int, attempt_ids: list[int]) -> set[int]:
    """The node's GPUs every one of the attempts ran on, if not all the node has."""
    own = Attempt.objects.filter(pk__in=attempt_ids, node_id=node_id).values_list(
        "gpu_indices", flat=True)
    ranks = AttemptRank.objects.filter(attempt_id__in=attempt_ids, node_id=node_id).values_list(
        "gpu_indices", flat=True)
    shared = set.intersection(*(set(gpus) for gpus in (*own, *ranks)))
    return shared if len(shared) < Gpu.objects.filter(node_id=node_id).count() else set()


def _jobs_failed_in_a_row(node_id: int, limit: int
                          ) -> tuple[dict[int, datetime], list[int]] | None:
    """The latest `limit` different jobs whose attempts failed on the node, with no attempt
    run to its end there since the first of them (job: when its first such attempt failed),
    and those attempts; None if there are not as many."""
    ran_here = Q(node_id=node_id) | Q(ranks__node_id=node_id)
    ends = Attempt.objects.filter(
        Q(failed_on_id=node_id) | Q(ran_here, outcome=Attempt.Outcome.SUCCEEDED),
        ended_at__isnull=False).order_by("-ended_at").values_list(
        "job_id", "failed_on_id", "ended_at", "pk").distinct()
    failed: dict[int, datetime] = {}
    attempts: list[int] = []
    for job_id, failed_on, ended_at, pk in ends[:limit * (settings.GPUSCHED_MAX_RETRIES + 1)]:
        if failed_on != node_id:
            return None  # one ran to its end here since
        failed[job_id] = ended_at  # walking back: its first in the streak, in the end
        attempts.append(pk)
        if len(failed) == limit:
            return failed, attempts
    return None


def _fine_elsewhere(node_id: int, since: datetime) -> bool:
    """Other nodes ran attempts to their end since, and at least as many as failed there."""
    ended = Attempt.objects.filter(ended_at__gte=since)
    succeeded = ended.filter(outcome=Attempt.Outcome.SUCCEEDED).exclude(node_id=node_id)
    failed = ended.filter(failed_on__isnull=False).exclude(failed_on_id=node_id)
    return 0 < succeeded.count() >= failed.count()
