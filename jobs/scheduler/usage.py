"""Decayed GPU usage per organization, project and user: what fair share ranks by.

An attempt's GPU-seconds count from its end, halved every `half_life_s` after it:

    usage(project) = sum over its attempts: gpus x (end - start) x 0.5 ** ((now - end) / h)

with h = `half_life_s`, and running attempts counted up to now, undecayed. Summing that over
the attempts of the last days on every tick grew with history (2.3-3.8 s a tick with 200,000
attempts in 40 h, what 500 GPUs of video jobs run). Instead each ended attempt is folded
once into the `UsageAccount` of its project and submitter, which is a sum of the same terms
decayed to its `as_of`, so a tick reads one row per project and user plus the live attempts.
The fold runs in the tick and marks the attempts it folds in the same transaction: a crash
folds all of them or none, and a concurrent fold skips the rows this one holds.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime

from django.db import transaction
from django.db.models import Exists, OuterRef, QuerySet

from jobs.models import Attempt, AttemptRank, UsageAccount
from jobs.scheduler.runtimes import fold_run_times

# ended attempts folded per tick at most: a backlog (after an upgrade) drains over a few
# ticks rather than stalling one
FOLD_BATCH = 10_000


def user_key(user_id: int | None) -> str:
    """A submitter as the policy keys users: the id as text, "" for nobody known."""
    return "" if user_id is None else str(user_id)


def decay(seconds: float, half_life_s: float) -> float:
    return math.pow(0.5, max(0.0, seconds) / half_life_s)


def used_gpu_seconds(gpus: int, started: datetime | None, ended: datetime) -> float:
    if started is None:  # ended before it ran: it used nothing
        return 0.0
    return gpus * max(0.0, (ended - started).total_seconds())


def rank_gpus(ranks: QuerySet[AttemptRank]) -> dict[int, int]:
    """attempt -> the GPUs it holds beyond its first node (a gang spanning nodes)."""
    out: dict[int, int] = defaultdict(int)
    for attempt, gpus in ranks.values_list("attempt_id", "gpu_indices"):
        out[attempt] += len(gpus)
    return out


def fold_ended_attempts(now: datetime, half_life_s: float, batch: int = FOLD_BATCH) -> int:
    """Add the attempts that ended since the last fold to their accounts (project, user),
    and the whole runs among them to the learned run times (runtimes.py)."""
    with transaction.atomic():
        # locked and skipped by a concurrent fold, so that no attempt is counted twice
        due = (Attempt.objects.filter(ended_at__isnull=False, usage_counted=False)
               .select_for_update(skip_locked=True, of=("self",)).order_by("pk")
               .annotate(resumed=Exists(Attempt.objects.filter(job_id=OuterRef("job_id"),
                                                               pk__lt=OuterRef("pk")))))
        rows = list(due.values_list("pk", "job__project_id", "job__submitted_by_id",
                                    "gpu_indices", "started_at", "ended_at", "outcome",
                                    "resumed", "job__gpus")[:batch])
        if not rows:
            return 0
        fold_run_times(_whole_runs(rows))
        beyond = rank_gpus(AttemptRank.objects.filter(attempt_id__in=[r[0] for r in rows]))
        added: dict[tuple[int, int | None], float] = defaultdict(float)
        for pk, project, user, gpus, started, ended, *_ in rows:
            used = used_gpu_seconds(len(gpus) + beyond.get(pk, 0), started, ended)
            if used:
                added[project, user] += used * decay((now - ended).total_seconds(), half_life_s)
        # an account may be made by a concurrent fold too: whichever inserts first wins, and
        # both then add to it under its row lock
        UsageAccount.objects.bulk_create(
            [UsageAccount(project_id=p, user_id=u, as_of=now) for p, u in added],
            ignore_conflicts=True)
        accounts = UsageAccount.objects.select_for_update().filter(
            project_id__in={p for p, _ in added}).order_by("pk")
        for account in accounts:
            value = added.get((account.project_id, account.user_id))
            if value is None:  # another user's account of the same project
                continue
            age = (now - account.as_of).total_seconds()
            account.gpu_seconds = account.gpu_seconds * decay(age, half_life_s) + value
            account.as_of = max(now, account.as_of)
            account.save(update_fields=["gpu_seconds", "as_of"])
        Attempt.objects.filter(pk__in=[r[0] for r in rows]).update(usage_counted=True)
        return len(rows)


def _whole_runs(rows: list[tuple]) -> list[tuple[int, int, float]]:
    """(project, GPUs, seconds) of the attempts that ran a job from its start to success: a
    resumed or retried attempt ran only part of it."""
    return [(project, job_gpus, (ended - started).total_seconds())
            for _, project, _, _, started, ended, outcome, resumed, job_gpus in rows
            if outcome == Attempt.Outcome.SUCCEEDED and not resumed and started is not None]


LiveUse = tuple[str, str, int | None, int, datetime]  # org, project, user, GPUs, started


def load_usage(now: datetime, half_life_s: float, live: Iterable[LiveUse] | None = None
               ) -> Usage:
    """Decayed GPU-seconds per org, (org, project) and (org, project, user), as of now.

    Users are keyed by id as text, as the queue loads them; jobs without a known submitter
    count as one user, "". Attempts that ended but are not folded yet are left out until the
    next fold. `live`: the started live attempts, where the caller has read them already.
    """
    usage = Usage(defaultdict(float), defaultdict(float), defaultdict(float))
    for org, project, user, value, as_of in UsageAccount.objects.values_list(
        "project__organization__slug", "project__name", "user_id", "gpu_seconds", "as_of"
    ):
        usage.add(org, project, user, value * decay((now - as_of).total_seconds(), half_life_s))
    for org, project, user, gpus, started in live if live is not None else _live():
        usage.add(org, project, user, used_gpu_seconds(gpus, started, now))
    return usage


def _live() -> Iterable[LiveUse]:
    beyond = rank_gpus(AttemptRank.objects.filter(attempt__ended_at__isnull=True,
                                                  gpus_freed_at__isnull=True))
    for pk, org, project, user, gpus, started in Attempt.objects.filter(
        ended_at__isnull=True, started_at__isnull=False, gpus_freed_at__isnull=True
    ).values_list("pk", "job__organization__slug", "job__project__name",
                  "job__submitted_by_id", "gpu_indices", "started_at"):
        yield org, project, user, len(gpus) + beyond.get(pk, 0), started


@dataclass(slots=True)
class Usage:
    """Decayed GPU-seconds at the three levels fair share ranks by (jobs/policy/ranking.py)."""

    org: dict[str, float]
    project: dict[tuple[str, str], float]
    user: dict[tuple[str, str, str], float]

    def add(self, org: str, project: str, user: int | None, used: float) -> None:
        self.org[org] += used
        self.project[org, project] += used
        self.user[org, project, user_key(user)] += used
