"""What running jobs' nodes are asked to stop them for, as a client reads it on the job: a
cancel, a preemption or a hold, and when the node kills the binary if it has not stopped."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime

from jobs.models import Attempt


def stops_of(job_ids: Iterable[int]) -> dict[int, tuple[str, datetime | None]]:
    """job id -> (what its live attempt is asked to stop for, the stop's deadline), for the
    jobs among `job_ids` whose node is stopping them. One query for a page of jobs."""
    return {job_id: (why, deadline) for job_id, why, deadline in Attempt.objects.filter(
        job_id__in=list(job_ids), ended_at__isnull=True).exclude(stop_requested="").values_list(
        "job_id", "stop_requested", "stop_deadline")}
