"""Where jobs hold GPUs now: every node of their live attempt, rank by rank."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable

from jobs.models import Attempt, AttemptRank

Placement = list[dict]  # [{"rank", "node", "gpus"}], rank 0 (the attempt's node) first


def placements_of(job_ids: Iterable[int]) -> dict[int, Placement]:
    """job id -> the GPUs its live attempt holds, for the jobs among `job_ids` holding any.
    Two queries for a page of jobs."""
    out: dict[int, Placement] = {}
    attempts: dict[int, int] = {}
    for pk, job_id, node, gpus in Attempt.objects.filter(
        job_id__in=list(job_ids), ended_at__isnull=True
    ).values_list("pk", "job_id", "node__name", "gpu_indices"):
        attempts[pk] = job_id
        out[job_id] = [{"rank": 0, "node": node, "gpus": sorted(gpus)}]
    further: dict[int, Placement] = defaultdict(list)
    for attempt, rank, node, gpus in AttemptRank.objects.filter(
        attempt_id__in=attempts).values_list("attempt_id", "rank", "node__name", "gpu_indices"):
        further[attempts[attempt]].append({"rank": rank, "node": node, "gpus": sorted(gpus)})
    for job_id, ranks in further.items():
        out[job_id].extend(sorted(ranks, key=lambda r: r["rank"]))
    return out
