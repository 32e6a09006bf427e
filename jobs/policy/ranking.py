"""The order queued jobs are considered in: tiers, orgs, projects, users, virtual deadlines.

Tiers. A tier below its guaranteed floor (running GPUs < guaranteed_share x fleet) goes
first; otherwise tiers compare by

    rank(tier) = level(tier) * G + min(a * W_oldest, B)

where level is the tier's position among the distinct priorities (0 = lowest), G is
`PolicyConfig.tier_gap`, a is `aging_per_hour`, W_oldest the wait in hours of the oldest
of the tier's jobs that head their user's jobs in a project, and B `max_age_boost`.

Tiers that share a priority age as one (by the oldest job among them) and go lowest
weighted share first, as orgs do. Orgs inside a tier, projects inside an org and users
inside a project go lowest weighted share first (each divides by its own weight):

    share(org) = (decayed GPU-seconds + running GPUs * tau) / org weight,  tau = half-life / ln 2

tau turns the GPUs an org runs right now into the GPU-seconds they will weigh in steady
state, so an org's share rises with every job it starts in this very round: one org with
10,000 queued jobs gets one start, then the next org's turn, and cannot hold its tier.
Inside a user's share of a project, jobs go by virtual deadline, enqueued_at + limit_weight
x time limit (`virtual_deadlines`), less a client's urgency (queues.by_project).

Wait bound: W_max(t) <= W_top + (L_max - L_t) * G / a + T_free while the fleet starts
anyone (docs/policy.md, "Wait bound (aging)"); past `starve_after_s` a job goes first.
"""

from __future__ import annotations

import heapq
import math
from collections import defaultdict
from collections.abc import Iterator, Mapping
from itertools import count
from operator import gt

from .advice import LateTail
from .deadlines import by_keys, virtual_deadlines
from .queues import (
    Group,
    OrgQueue,
    ProjectQueue,
    TierQueue,
    by_project,
    oldest_head,
    tail,
    tier_levels,
    tier_usage,
)
from .shares import Shares
from .tier_choice import best_tier, best_tier_weighted, oldest_wait_h
from .types import QueuedJob, Snapshot


class RankedQueue:
    """Yields queued jobs in rank order; shares are re-read after every placement."""

    def __init__(self, snap: Snapshot, shares: Shares, floors: Mapping[str, float]) -> None:
        self.snap, self.shares, self.floors = snap, shares, floors
        self.cfg = snap.config
        self.tau = snap.config.usage_half_life_s / math.log(2)
        self.unknown: list[QueuedJob] = []  # jobs of tiers the snapshot does not define
        self.projects: list[ProjectQueue] = []
        levels = tier_levels(snap.tiers)
        self.tiers = {n: TierQueue(t, levels[n]) for n, t in snap.tiers.items()}
        if self.cfg.late_fraction is not None:
            for tier in self.tiers.values():
                tier.late_after = snap.now - self.cfg.late_fraction * tier.spec.start_slo_s
        self._org_tiers: dict[str, list[TierQueue]] = defaultdict(list)
        self._seq = count(1)
        queue = snap.queued
        if not snap.queue_sorted:
            keys = virtual_deadlines(queue, self.cfg.limit_weight)
            if any(map(gt, keys, keys[1:])):
                queue = by_keys(queue, keys)
        # tier -> jobs enqueued at or before this are past its start SLO
        late_before = {n: snap.now - t.start_slo_s for n, t in snap.tiers.items()}
        grouped = by_project(queue, snap.holds, late_before, self.cfg.limit_weight)
        self.late = LateTail(late_before, grouped.late)  # capacity advice for the tail
        self.shortest_limit = grouped.shortest_limit  # the least time limit in the queue
        self.held = grouped.held  # the jobs that held a reservation last round
        self._build(grouped.projects)
        # tier -> decayed GPU-seconds of its orgs, where tiers share a priority (else empty)
        self._tier_usage = tier_usage(snap, self.tiers)

    def _build(self, projects: dict[tuple[str, str, str], dict[str, list[QueuedJob]]]) -> None:
        seq, every_head = self._seq, self.cfg.late_fraction is not None
        for (tier_name, org_name, project_name), lists in projects.items():
            tier = self.tiers.get(tier_name)
            if tier is None:
                self.unknown.extend(job for jobs in lists.values() for job in jobs)
                continue
            org = tier.orgs.get(org_name)
            if org is None:
                org = tier.orgs[org_name] = OrgQueue(org_name, {})
                tier.live += 1
                self._org_tiers[org_name].append(tier)
            project = ProjectQueue(tier_name, org_name, project_name, lists, len(lists))
            org.projects[project_name] = project
            org.live += 1
            self.projects.append(project)
            # a project of one user is split at once; late jobs (opt-in) need every user's
            # head; other projects wait until the walk reaches them
            if len(lists) == 1 or every_head:
                self._split(project)
                for group in project.users.values():
                    self._push_oldest(tier, project, group, heap=False)
            else:
                enq, user = oldest_head(lists)
                tier.oldest.append((enq, next(seq), 0, project, user))
        for tier in self.tiers.values():
            heapq.heapify(tier.oldest)  # one pass: thousands of entries, pushed one by one
            for org in tier.orgs.values():
                for project in org.projects.values():
                    self._push_project(org, project.name)
                self._push_org(tier, org.name)

    def _split(self, project: ProjectQueue) -> None:
        """A Group per user of the project and, for more than one, the users' heap."""
        tier, org, name = project.tier, project.org, project.name
        if len(project.lists) == 1:
            for user, jobs in project.lists.items():
                project.users[user] = Group(tier, org, name, user, jobs)
            return
        for user, user_jobs in project.lists.items():
            project.users[user] = Group(tier, org, name, user, user_jobs)
            project.seq[user] = seq = next(self._seq)
            project.heap.append((self._user_share((org, name, user)), seq, user))
        heapq.heapify(project.heap)

    def _split_reached(self, tier: TierQueue, project: ProjectQueue) -> None:
        """Split a project the walk reaches first: its other users' heads join the tier's."""
        self._split(project)
        for group in project.users.values():
            self._push_oldest(tier, project, group)

    # -- shares -----------------------------------------------------------------------------

    def org_share(self, org: str) -> float:
        used = self.snap.usage.get(org, 0.0) + self.shares.org[org] * self.tau
        return used / max(self.snap.org_weights.get(org, 1.0), 1e-9)

    def _project_share(self, org: str, project: str) -> float:
        key = (org, project)
        used = self.snap.project_usage.get(key, 0.0) + self.shares.project[key] * self.tau
        return used / max(self.snap.project_weights.get(key, 1.0), 1e-9)

    def _user_share(self, key: tuple[str, str, str]) -> float:
        used = self.snap.user_usage.get(key, 0.0) + self.shares.user.get(key, 0) * self.tau
        return used / max(self.snap.user_weights.get((key[0], key[2]), 1.0), 1e-9)

    def _tier_share(self, tier: TierQueue) -> float:
        name = tier.spec.name
        used = self._tier_usage[name] + self.shares.tier[name] * self.tau
        return used / max(tier.spec.weight, 1e-9)

    def _push_org(self, tier: TierQueue, org: str) -> None:
        seq = tier.seq[org] = next(self._seq)
        heapq.heappush(tier.heap, (self.org_share(org), seq, org))

    def _push_project(self, org: OrgQueue, project: str) -> None:
        seq = org.seq[project] = next(self._seq)
        heapq.heappush(org.heap, (self._project_share(org.name, project), seq, project))

    def _push_user(self, org: str, project: ProjectQueue, user: str) -> None:
        seq = project.seq[user] = next(self._seq)
        share = self._user_share((org, project.name, user))
        heapq.heappush(project.heap, (share, seq, user))

    def _push_oldest(self, tier: TierQueue, project: ProjectQueue, group: Group,
                     heap: bool = True) -> None:
        if not group.done:
            entry = (group.jobs[group.pos].enqueued_at, next(self._seq), group.pos, project,
                     group.user)
            if heap:
                heapq.heappush(tier.oldest, entry)
            else:  # heapified after the build
                tier.oldest.append(entry)
            if tier.late_after is not None:
                self._push_late(tier, group)

    # -- tier choice ------------------------------------------------------------------------

    def below_floor(self, tier: str) -> bool:
        return self.shares.tier[tier] < self.floors.get(tier, 0.0)

    def _best_tier(self) -> TierQueue | None:
        tiers, used, now = self.tiers.values(), self.shares.tier, self.snap.now
        if self._tier_usage:
            return best_tier_weighted(tiers, used, self.floors, self.cfg, now,
                                      self._tier_share)
        return best_tier(tiers, used, self.floors, self.cfg, now)

    # -- popping ----------------------------------------------------------------------------

    def pop(self) -> QueuedJob | None:
        """The next job in rank order, or None when no tier has jobs left."""
        tier = self._best_tier()
        if tier is None:
            return None
        group = self._starving_group(tier) or self._late_group(tier)
        if group is not None:
            org = tier.orgs[group.org]
            project = org.projects[group.project]
        else:
            org = self._top_org(tier)
            project = self._top_project(org)
            if not project.split:
                self._split_reached(tier, project)
            group = self._top_user(project)
        job = group.jobs[group.pos]
        group.pos += 1
        tier.rank = None
        self.late.reached(job)
        if group.done:
            project.live -= 1
            if project.live == 0:
                org.live -= 1
                if org.live == 0:
                    tier.live -= 1
        else:
            self._push_oldest(tier, project, group)
        return job

    def live_tiers(self) -> list[str]:
        """Tiers with jobs left to consider."""
        return [n for n, t in self.tiers.items() if t.live > 0 and not t.excluded]

    def starves(self, tier: TierQueue) -> bool:
        """Whether the tier's oldest job waited `starve_after_s` (it then goes first)."""
        limit = self.cfg.starve_after_s
        if limit is None:
            return False
        wait_h = oldest_wait_h(tier, self.snap.now)  # drops stale entries
        return wait_h is not None and wait_h * 3600.0 >= limit

    def _starving_group(self, tier: TierQueue) -> Group | None:
        """The group of the tier's oldest job once it waited `starve_after_s`, if any.

        Fair share alone lets a heavy org's jobs wait as long as lighter orgs keep its tier
        busy; past this wait a job goes first in its tier, whatever its org's share. Every
        starving job does, oldest first: served one a round, a burst of them waited on for
        the GPUs that lighter orgs took in between (docs/policy-trials.md, "Ranking").
        """
        if not self.starves(tier):
            return None
        project, user = tier.oldest[0][3:]
        if not project.split:
            self._split_reached(tier, project)
        return project.users[user]

    def _late_group(self, tier: TierQueue) -> Group | None:
        """The group of the lowest-share org that has a late head job (oldest first), if any.

        A job that waited `late_fraction` of its tier's start SLO goes before the jobs of its
        tier that are not late: it is considered, round after round, before the jobs that
        would take the GPUs it drains for, so its reservation holds. Among late jobs, orgs
        still go by share and then oldest first.
        """
        heap = tier.late
        while heap:
            share, enq, _, pos, group = heap[0]
            org = tier.orgs[group.org]
            if (group.pos != pos or group.done or group.excluded or org.excluded
                    or org.projects[group.project].excluded):
                heapq.heappop(heap)
                continue
            now_share = self.org_share(group.org)
            if now_share != share:
                heapq.heapreplace(heap, (now_share, enq, next(self._seq), pos, group))
                continue
            return group
        return None

    def _push_late(self, tier: TierQueue, group: Group) -> None:
        if tier.late_after is None or group.done:
            return
        enq = group.jobs[group.pos].enqueued_at
        if enq <= tier.late_after:
            item = (self.org_share(group.org), enq, next(self._seq), group.pos, group)
            heapq.heappush(tier.late, item)

    def _top_org(self, tier: TierQueue) -> OrgQueue:
        heap = tier.heap
        while True:
            _, seq, name = heap[0]
            org = tier.orgs[name]
            if tier.seq[name] == seq and org.live > 0 and not org.excluded:
                return org
            heapq.heappop(heap)

    def _top_project(self, org: OrgQueue) -> ProjectQueue:
        heap = org.heap
        while True:
            _, seq, name = heap[0]
            project = org.projects[name]
            if org.seq[name] == seq and project.live > 0 and not project.excluded:
                return project
            heapq.heappop(heap)

    @staticmethod
    def _top_user(project: ProjectQueue) -> Group:
        if not project.heap:  # one user (still live: the project is)
            return next(iter(project.users.values()))
        heap = project.heap
        while True:
            _, seq, name = heap[0]
            group = project.users[name]
            if project.seq[name] == seq and not group.done and not group.excluded:
                return group
            heapq.heappop(heap)

    def charged(self, job: QueuedJob) -> None:
        """Re-rank the job's org (in every tier), project and user after it got GPUs."""
        self.charged_org(job.org)
        tier = self.tiers.get(job.tier)
        if tier is not None and job.org in tier.orgs:
            org = tier.orgs[job.org]
            project = org.projects[job.project]
            if project.live > 0 and not project.excluded:
                self._push_project(org, job.project)
                if project.heap and not project.users[job.user].done \
                        and not project.users[job.user].excluded:
                    self._push_user(job.org, project, job.user)

    def charged_org(self, org_name: str) -> None:
        """Re-rank an org in every tier after its running GPUs changed."""
        for tier in self._org_tiers.get(org_name, ()):
            org = tier.orgs[org_name]
            if org.live > 0 and not org.excluded:
                self._push_org(tier, org_name)

    def unreached(self) -> Iterator[tuple[ProjectQueue, list[QueuedJob], int]]:
        """(project, jobs, first): the jobs the round has not considered (queues.tail)."""
        return tail(self.projects)

    def exclude_org(self, tier: str, org: str) -> None:
        """Stop considering an org's jobs in a tier (it is at its cap); reasons come later."""
        t = self.tiers[tier]
        o = t.orgs[org]
        if not o.excluded and o.live > 0:
            t.live -= 1
        o.excluded = True
        t.rank = None

    def exclude_project(self, tier: str, org: str, project: str) -> None:
        """Stop considering a project's jobs in a tier (it is at its cap): its jobs left count
        in no capacity advice, their reasons come later."""
        t = self.tiers[tier]
        o = t.orgs[org]
        p = o.projects[project]
        if p.excluded:
            return
        p.excluded = True
        t.rank = None
        for _, jobs, first in tail([p]):
            if p.users and p.users[jobs[first].user].excluded:
                continue  # out of the walk and the advice already (exclude_user)
            for job in jobs[first:]:
                self.late.reached(job)
        if p.live > 0:
            o.live -= 1
            if o.live == 0 and not o.excluded:
                t.live -= 1

    def exclude_user(self, tier: str, org: str, user: str) -> None:
        """Stop considering a user's jobs in every project of an org (they are at their cap):
        their jobs left count in no capacity advice, their reasons come later."""
        t = self.tiers[tier]
        o = t.orgs[org]
        for p in o.projects.values():
            if user not in p.lists or p.excluded:  # an excluded project's are out already
                continue
            if not p.split:
                self._split_reached(t, p)
            group = p.users[user]
            if group.excluded or group.done:
                continue
            group.excluded = True
            for job in group.jobs[group.pos:]:
                self.late.reached(job)
            p.live -= 1
            if p.live == 0 and not p.excluded:
                o.live -= 1
                if o.live == 0 and not o.excluded:
                    t.live -= 1
        t.rank = None

    def exclude_tier(self, tier: str) -> None:
        self.tiers[tier].excluded = True

    def org_excluded(self, tier: str, org: str) -> bool:
        return self.tiers[tier].orgs[org].excluded

    def tier_excluded(self, tier: str) -> bool:
        return self.tiers[tier].excluded
