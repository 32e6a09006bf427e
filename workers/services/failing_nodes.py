"""A node that fails the jobs it runs is taken out of service before it spends them all.

A node with a bad GPU, a broken driver or a full disk fails every job it gets, and fails it
fast, so it draws job after job and spends their retries. Where the attempts of
GPUSCHED_CORDON_AFTER_FAILURES different jobs failed in a row on a node (crashes, hangs,
broken outputs: failures another try may not repeat) while, since the first of them, other
nodes ran at least as many attempts to their end as failed there, the node is cordoned with
its reason; an operator returns it to service once it is mended. A failure everywhere at
once (a bad release of the binary) cordons nothing: the fault is not the nodes'.
"""

from __future__ import annotations

import logging
from datetime import datetime

from django.conf import settings
from django.db.models import Q

from jobs.models import Attempt, AttemptRank
from workers.models import Node, NodeState

log = logging.getLogger(__name__)


def failing_node(attempt: Attempt, rank: int) -> int:
    """The node whose binary ended the attempt: rank 0's, or a gang's failing rank's."""
    if rank == 0:
        return attempt.node_id
    return AttemptRank.objects.filter(attempt=attempt, rank=rank).values_list(
        "node_id", flat=True).get()


def note_failure(attempt: Attempt, node_id: int) -> bool:
    """Record that the attempt failed on the node; cordon the node if it fails job after
    job. True if this cordoned it."""
    Attempt.objects.filter(pk=attempt.pk).update(failed_on_id=node_id)
    limit = settings.GPUSCHED_CORDON_AFTER_FAILURES
    failed = _jobs_failed_in_a_row(node_id, limit) if limit > 0 else None
    if not failed or not _fine_elsewhere(node_id, since=min(failed.values())):
        return False
    jobs = ", ".join(str(job) for job in sorted(failed))
    reason = f"the attempts of {limit} jobs failed in a row here (jobs {jobs})"[:200]
    cordoned = Node.objects.filter(pk=node_id, state=NodeState.ACTIVE).update(
        state=NodeState.CORDONED, state_reason=reason)
    if cordoned:
        log.warning("node %s cordoned: %s", node_id, reason, extra={"node_id": node_id})
    return bool(cordoned)


def _jobs_failed_in_a_row(node_id: int, limit: int) -> dict[int, datetime] | None:
    """The latest `limit` different jobs whose attempts failed on the node, with no attempt
    run to its end there since the first of them (job: when its attempt failed); None if
    there are not as many."""
    ran_here = Q(node_id=node_id) | Q(ranks__node_id=node_id)
    ends = Attempt.objects.filter(
        Q(failed_on_id=node_id) | Q(ran_here, outcome=Attempt.Outcome.SUCCEEDED),
        ended_at__isnull=False).order_by("-ended_at").values_list(
        "job_id", "failed_on_id", "ended_at").distinct()
    failed: dict[int, datetime] = {}
    for job_id, failed_on, ended_at in ends[:limit * (settings.GPUSCHED_MAX_RETRIES + 1)]:
        if failed_on != node_id:
            return None  # one ran to its end here since
        failed[job_id] = ended_at
        if len(failed) == limit:
            return failed
    return None


def _fine_elsewhere(node_id: int, since: datetime) -> bool:
    """Other nodes ran attempts to their end since, and at least as many as failed there."""
    ended = Attempt.objects.filter(ended_at__gte=since)
    succeeded = ended.filter(outcome=Attempt.Outcome.SUCCEEDED).exclude(node_id=node_id)
    failed = ended.filter(failed_on__isnull=False).exclude(failed_on_id=node_id)
    return 0 < succeeded.count() >= failed.count()
