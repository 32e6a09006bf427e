"""Which stored copies of a job's checkpoints a resume reads (workers/services/checkpoints.py).

A resume reads one attempt's copies, one for each of its nodes, all of one moment of the
binary, or none: the cut. For a job on one node that is its latest copy. For a gang it is
the copies its nodes made at the stop, when every node made one and they name one step
(the binary's checkpoint on SIGTERM, which a gang's ranks write at a step they agree on;
none named, they are taken as one), else the copies of the latest step that every node
copied while it ran. Ranks from different attempts, or from different steps, would resume
at different points, and a rank without a copy would start from the beginning while its
peers go on; and a job the scheduler places on another number of nodes starts afresh,
since half a gang's state is no checkpoint.
"""

from __future__ import annotations

from collections import defaultdict
from datetime import datetime
from typing import NamedTuple

from django.conf import settings
from django.db.models import Count, QuerySet

from jobs.models import Attempt, Job, StoredCheckpoint
from jobs.states import TERMINAL


class Copy(NamedTuple):
    pk: int
    job_id: int
    attempt_id: int
    rank: int
    name: str
    step: int | None
    taken_at: datetime | None  # None: made at the stop


def resume_copies(job_id: int, nodes: int) -> dict[int, str]:
    """The copies, by rank, that an attempt of the job on `nodes` nodes resumes from: the
    latest attempt's cut on as many nodes, or none."""
    found = latest_cut(_copies(StoredCheckpoint.objects.filter(job_id=job_id)), nodes)
    return {c.rank: c.name for c in found[1]} if found else {}


def may_resume(job: Job) -> bool:
    """Whether the job can hold copies a retry reads: it ran, and it has not ended."""
    return job.started_at is not None and job.state not in TERMINAL


def resume_point(job: Job) -> dict | None:
    """What a retry of the job would resume from now (resume_points), or None."""
    return resume_points([job.pk]).get(job.pk) if may_resume(job) else None


def resume_points(job_ids: list[int]) -> dict[int, dict]:
    """job id -> what a retry of the job would resume from now, for the jobs among
    `job_ids` that hold a cut: `{attempt, nodes, step, taken_at}` (`step`: the binary's, if
    it announced one; `taken_at`: when the files were taken while it ran, None for the
    checkpoint written at its stop). Two queries for a page of jobs, none for no jobs."""
    if not job_ids:
        return {}
    copies = copies_of(job_ids)
    spans = _spans([c.attempt_id for job in copies.values() for c in job])
    points = {}
    for job_id, job in copies.items():
        found = latest_cut(job, spans=spans)
        if found is not None:
            attempt_id, cut = found
            taken = [c.taken_at for c in cut if c.taken_at is not None]
            points[job_id] = {"attempt": attempt_id, "nodes": len(cut), "step": cut[0].step,
                              "taken_at": min(taken) if len(taken) == len(cut) else None}
    return points


def latest_cut(copies: list[Copy], nodes: int | None = None,
               spans: dict[int, int] | None = None) -> tuple[int, list[Copy]] | None:
    """The latest attempt among `copies` (one job's) that has a cut (on `nodes` nodes, if
    given), and its cut; `spans`, the nodes of each attempt, if read already."""
    by_attempt: dict[int, list[Copy]] = defaultdict(list)
    for c in copies:
        by_attempt[c.attempt_id].append(c)
    spans = spans if spans is not None else _spans(list(by_attempt))
    for attempt_id in sorted(by_attempt, reverse=True):
        span = spans.get(attempt_id, 1)
        cut = _cut_of(by_attempt[attempt_id], span)
        if cut and nodes in (None, span):
            return attempt_id, cut
    return None


def step_kept_at(attempt_id: int, step: int) -> datetime | None:
    """When a gang's work up to `step` was kept: once every node of the attempt copied that
    step while it ran, the earliest of their moments (what is billed as kept); else None."""
    taken = list(_ran(attempt_id).filter(step=step).values_list("taken_at", flat=True))
    return min(taken) if len(taken) == nodes_of(attempt_id) else None


def stop_copies_whole(attempt_id: int, own: str, own_step: int | None) -> bool:
    """Whether the attempt's checkpoint written at its stop is one a retry on any nodes
    resumes from: every node's copy stored, all of one step (rank 0's is `own`, of
    `own_step`, not yet recorded), or copies are not made (every node shares the work
    root)."""
    if not settings.GPUSCHED_STORE_CHECKPOINTS:
        return True
    others = StoredCheckpoint.objects.filter(
        attempt_id=attempt_id, rank__gt=0, taken_at__isnull=True).values_list("step", flat=True)
    return bool(own) and _whole_stop([own_step, *others], nodes_of(attempt_id))


def _whole_stop(steps: list[int | None], nodes: int) -> bool:
    """Whether copies made at a stop, of these steps, are a gang's cut: one a node, of one
    step (None for all: a binary that names none)."""
    return len(steps) == nodes and len(set(steps)) == 1


def whole_step(attempt_id: int) -> int | None:
    """The latest step every node of a gang copied while it ran (what a resume reads unless
    every node made a copy at the stop)."""
    nodes = nodes_of(attempt_id)
    return _ran(attempt_id).values("step").annotate(n=Count("pk")).filter(n=nodes).order_by(
        "-step").values_list("step", flat=True).first()


def _ran(attempt_id: int) -> QuerySet[StoredCheckpoint]:
    """The attempt's copies made while it ran, of announced steps."""
    return StoredCheckpoint.objects.filter(attempt_id=attempt_id, step__isnull=False,
                                           taken_at__isnull=False)


def superseded(copies: list[Copy]) -> list[Copy]:
    """Of one job's copies, those no resume will read: older than its latest cut."""
    found = latest_cut(copies)
    if found is None:
        return []
    attempt_id, cut = found
    newest = max((c.step for c in cut if c.step is not None), default=None)
    at_stop = all(c.taken_at is None for c in cut)
    return [c for c in copies if c not in cut and (
        c.attempt_id < attempt_id or c.attempt_id == attempt_id and c.taken_at is not None
        and (at_stop or newest is None or (c.step is not None and c.step < newest)))]


def copies_of(job_ids: list[int]) -> dict[int, list[Copy]]:
    """The stored copies of each of the jobs."""
    found: dict[int, list[Copy]] = defaultdict(list)
    for c in _copies(StoredCheckpoint.objects.filter(job_id__in=job_ids)):
        found[c.job_id].append(c)
    return found


def _copies(rows: QuerySet[StoredCheckpoint]) -> list[Copy]:
    return [Copy(*row) for row in rows.values_list(
        "pk", "job_id", "attempt_id", "rank", "name", "step", "taken_at")]


def _cut_of(copies: list[Copy], nodes: int) -> list[Copy]:
    if nodes == 1:
        return copies[:1]  # a job on one node keeps one copy an attempt
    at_stop = [c for c in copies if c.taken_at is None]
    if _whole_stop([c.step for c in at_stop], nodes):
        return at_stop
    by_step: dict[int, list[Copy]] = defaultdict(list)
    for c in copies:
        if c.taken_at is not None and c.step is not None:
            by_step[c.step].append(c)
    whole = [step for step, cs in by_step.items() if len(cs) == nodes]
    return by_step[max(whole)] if whole else []


def nodes_of(attempt_id: int) -> int:
    """How many nodes the attempt runs on: its own and its ranks'."""
    return _spans([attempt_id]).get(attempt_id, 1)


def _spans(attempt_ids: list[int]) -> dict[int, int]:
    """How many nodes each attempt ran on."""
    return dict(Attempt.objects.filter(pk__in=attempt_ids).annotate(
        n=Count("ranks") + 1).values_list("pk", "n"))
