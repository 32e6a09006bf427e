"""The queue a round walks, level by level: a tier's orgs, an org's projects, a project's
users, and each user's jobs (`Group`), with the tiers' levels and usage they are ranked by.
`ranking.RankedQueue` keeps them in rank order."""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass, field
from itertools import chain

from .advice import LateKey
from .types import QueuedJob, Snapshot, TierSpec


@dataclass(slots=True, eq=False)
class Group:
    """Queued jobs of one (tier, org, project, user) by virtual deadline; pos is the next one."""

    tier: str
    org: str
    project: str
    user: str
    jobs: list[QueuedJob]
    pos: int = 0
    excluded: bool = False  # its user is at their running-GPU cap: out of this round's walk

    @property
    def done(self) -> bool:
        return self.pos >= len(self.jobs)


@dataclass(slots=True, eq=False)
class ProjectQueue:
    """A project's queued jobs in one tier, and per user once split (RankedQueue._split).

    Most projects of a 50,000-job queue are never reached in a round: their users get a
    Group and a place in the users' heap only when the walk first reaches them.
    """

    tier: str
    org: str
    name: str
    lists: dict[str, list[QueuedJob]]  # user -> its jobs, by virtual deadline
    live: int  # users with jobs left
    users: dict[str, Group] = field(default_factory=dict)  # filled by the split
    heap: list[tuple[float, int, str]] = field(default_factory=list)  # (share, seq, user)
    seq: dict[str, int] = field(default_factory=dict)
    excluded: bool = False  # at its running-GPU cap: out of this round's walk

    @property
    def split(self) -> bool:
        return bool(self.users)


@dataclass(slots=True, eq=False)
class OrgQueue:
    name: str
    projects: dict[str, ProjectQueue]
    heap: list[tuple[float, int, str]] = field(default_factory=list)  # (share, seq, project)
    seq: dict[str, int] = field(default_factory=dict)
    live: int = 0  # projects with jobs left
    excluded: bool = False


@dataclass(slots=True, eq=False)
class TierQueue:
    spec: TierSpec
    level: int
    orgs: dict[str, OrgQueue] = field(default_factory=dict)
    heap: list[tuple[float, int, str]] = field(default_factory=list)  # (share, seq, org)
    seq: dict[str, int] = field(default_factory=dict)
    # (enqueued_at, seq, pos, project, user) of the jobs that head a user's list
    oldest: list[tuple[float, int, int, ProjectQueue, str]] = field(default_factory=list)
    live: int = 0  # orgs with jobs left
    excluded: bool = False
    late_after: float | None = None  # jobs enqueued before this are late
    late: list[tuple[float, float, int, int, Group]] = field(default_factory=list)
    # rank by the oldest head job, cached between pops of other tiers (None: recompute)
    rank: float | None = None


def tier_levels(tiers: dict[str, TierSpec]) -> dict[str, int]:
    """Position of each tier among the distinct priorities, 0 for the lowest."""
    order = sorted({t.priority for t in tiers.values()})
    return {name: order.index(t.priority) for name, t in tiers.items()}


def tier_floors(tiers: dict[str, TierSpec], fleet: int) -> dict[str, int]:
    """Each tier's guaranteed floor in whole GPUs: a fraction of a GPU protects nothing a
    gang could use."""
    return {n: math.floor(t.guaranteed_share * fleet + 1e-9) for n, t in tiers.items()}


def tier_usage(snap: Snapshot, tiers: dict[str, TierQueue]) -> dict[str, float]:
    """Decayed usage per tier, summed over its orgs; only needed where tiers tie."""
    levels = [t.level for t in tiers.values()]
    if len(set(levels)) == len(levels):
        return {}
    orgs = {name: set(tier.orgs) for name, tier in tiers.items()}  # orgs with queued jobs
    for run in snap.running:
        if run.tier in orgs:
            orgs[run.tier].add(run.org)
    return {t: sum(snap.usage.get(o, 0.0) for o in members) for t, members in orgs.items()}


@dataclass(slots=True)
class Grouped:
    """The queue as the round ranks it, from one pass over it (`by_project`)."""

    # (tier, org, project) -> user -> its jobs in queue order
    projects: dict[tuple[str, str, str], dict[str, list[QueuedJob]]]
    held: list[QueuedJob]  # the jobs that held a reservation last round
    late: dict[LateKey, int]  # GPUs of the jobs already past their tier's start SLO
    shortest_limit: float  # the least time limit of any job


def by_project(
    queue: list[QueuedJob], held: dict[int, dict[str, int]], late_before: dict[str, float],
    limit_weight: float,
) -> Grouped:
    """Group the queue by (tier, org, project, user), find last round's reservations, sum
    the GPUs of late jobs (enqueued at or before `late_before[tier]`) for capacity advice,
    and find the least time limit.

    A user's list with a job its client made urgent is put in order again, by virtual
    deadline less urgency (`limit_weight`). Only the user's own list: the lists' order, which
    breaks ties of equal shares between users, projects and orgs, stays the queue's, so
    urgency moves a job ahead of its user's own jobs and of nobody else's.

    One loop: reading a job costs more than what is done with it (the round is bound by
    memory at 50,000 jobs), so a second pass for the late jobs cost twice what this one adds.
    """
    buckets: dict[tuple[str, str, str, str], list[QueuedJob]] = defaultdict(list)
    kept: list[QueuedJob] = []
    late: dict[LateKey, int] = defaultdict(int)
    cutoff, never = late_before.get, -math.inf
    shortest = math.inf
    urgent: set[tuple[str, str, str, str]] = set()
    for job in queue:
        tier = job.tier
        buckets[tier, job.org, job.project, job.user].append(job)
        if job.urgency_s:
            urgent.add((tier, job.org, job.project, job.user))
        if job.job_id in held:
            kept.append(job)
        if job.enqueued_at <= cutoff(tier, never):
            late[tier, job.org, job.gpu_types] += job.gpus
        if job.time_limit_s < shortest:
            shortest = job.time_limit_s
    for key in urgent:
        buckets[key].sort(key=lambda j: j.enqueued_at + limit_weight * j.time_limit_s
                          - j.urgency_s)
    projects: dict[tuple[str, str, str], dict[str, list[QueuedJob]]] = defaultdict(dict)
    for (tier, org, project, user), jobs in buckets.items():
        projects[tier, org, project][user] = jobs
    return Grouped(projects, kept, late, shortest)


def oldest_head(lists: dict[str, list[QueuedJob]]) -> tuple[float, str]:
    """(enqueued_at, user) of the oldest job heading a user's list, the first user on ties
    (a loop: a generator of tuples cost a build over thousands of projects twice as much)."""
    best_enq, best_user = math.inf, ""
    for user, jobs in lists.items():
        enq = jobs[0].enqueued_at
        if enq < best_enq or (enq == best_enq and user < best_user):
            best_enq, best_user = enq, user
    return best_enq, best_user


def is_head(project: ProjectQueue, user: str, pos: int) -> bool:
    """Whether the user's job at `pos` still heads its jobs in the project, and the user is
    still in the walk: an entry of a tier's oldest-head heap is current (a project not split
    yet is still at 0)."""
    if not project.users:
        return pos == 0
    group = project.users[user]
    return group.pos == pos and not group.excluded


def heads_before(tier: TierQueue, before: float) -> list[QueuedJob]:
    """The tier's jobs heading their user's jobs in a project (the entries of its oldest-head
    heap that are current) enqueued at or before `before`, in no order."""
    return [project.lists[user][pos] for enq, _, pos, project, user in tier.oldest
            if enq <= before and is_head(project, user, pos)]


def tail(projects: list[ProjectQueue]
         ) -> Iterator[tuple[ProjectQueue, list[QueuedJob], int]]:
    """(project, jobs, first): the jobs a round has not considered, a run per project the
    walk did not reach and per user of those it reached."""
    for project in projects:
        if not project.split:  # one run (a copy in C costs less than a run per user)
            lists = project.lists.values()
            jobs = next(iter(lists)) if len(lists) == 1 else list(chain.from_iterable(lists))
            yield project, jobs, 0
            continue
        for group in project.users.values():
            if not group.done:
                yield project, group.jobs, group.pos
