"""The gpusched policy: `decide(snapshot) -> Decisions`, pure and deterministic.

One round walks the queue in rank order (ranking.py) and, for each job:

1. skips it with a reason when its org, project or submitter is at a running-GPU cap or
   its tier at its ceiling (caps.py);
2. starts it now on the best-fit node (placement.py), or on GPUs reserved for a job ahead
   of it if it ends before that job's reservation starts (backfill.py);
3. otherwise, if its tier is below its guaranteed floor or it is about to miss its start
   SLO, and GPUs will not free up within the hysteresis window, preempts lower-tier work
   (preemption.py) and is placed on the victims' GPUs (`preempted=True`);
4. otherwise reserves the earliest GPUs it can have (up to `max_reservations` jobs a round)
   and gets a pending reason with an estimated start.

Before the walk, late jobs keep the previous round's reservations (kept.py): without this,
jobs ranked ahead of a waiting gang take the GPUs freed on the node it drains, and an 8-GPU
job waits for a moment when a whole node frees up by chance.

The walk stops when nothing is free, no preemption is possible and no reserved GPU is idle
or could be lent or taken over while no reservation budget is left, or after
`backfill_depth` jobs past the first blocked one; the rest of the queue gets shared reasons.
"""

from __future__ import annotations

from collections import defaultdict

from . import caps, explain, kept, reasons, walk_end, yielding
from .backfill import Hold, Timeline
from .gcpause import gc_paused
from .placement import FreeIndex
from .pools import Pools
from .preemption import Plan, VictimIndex, grace_s, loss_bound
from .queues import tier_floors, tier_levels
from .ranking import RankedQueue
from .shares import Shares
from .types import (
    Allocation,
    Decisions,
    PendingReason,
    Placement,
    Preemption,
    QueuedJob,
    Reservation,
    Snapshot,
)

_INF = float("inf")


def decide(snapshot: Snapshot) -> Decisions:
    """Place, preempt, reserve, and explain every queued job that does not start."""
    with gc_paused():
        return _Round(snapshot).run()


class _Round:
    def __init__(self, snap: Snapshot) -> None:
        self.snap, self.cfg, self.now = snap, snap.config, snap.now
        self.out = Decisions()
        self.index = FreeIndex(snap.nodes, snap.now)
        self.fleet = fleet = snap.fleet_gpus()
        self.levels = tier_levels(snap.tiers)
        self.floors = tier_floors(snap.tiers, fleet)
        self.reserve_cap = self.cfg.reserve_share * fleet
        self.reserved_gpus = 0
        self.ceilings = {n: t.max_share * fleet for n, t in snap.tiers.items()}
        self.shares = Shares.of(snap.running)
        levels, index = self.levels, self.index
        for run in snap.running:
            level = levels.get(run.tier)
            if level is not None:
                for a in run.allocations:
                    index.raise_label(a.node, level)
        self.timeline = Timeline(self.now, snap.running, self.index)
        self.victims = VictimIndex(
            snap.running, snap.tiers, self.levels, self.index, self.now, self.cfg
        )
        self.queue = RankedQueue(snap, self.shares, self.floors)
        self.no_free_min: dict[tuple, int] = {}  # job class -> smallest gang that found nothing
        self.no_victims_min: dict[tuple, int] = {}  # same, for preemption plans
        self.fits: dict[tuple, bool] = {}
        self.waiting_levels: dict[int, str] = {}  # level -> a tier with a blocked job
        self.budget_used: dict[str, int] = defaultdict(int)
        self.short: dict[str, int] = defaultdict(int)
        self.after_block: int | None = None
        self.preempt_tries = 0
        # tier level -> smallest gang of its blocked jobs that hold no reservation
        self.blocked_k: dict[int, int] = {}
        self.blocked_tier: dict[int, str] = {}
        self.guarded = False  # the last job was refused GPUs a higher tier needs
        self.explained = 0
        self.kept: dict[int, Hold | None] = {}  # job -> kept reservation (None: started)
        # job class -> smallest gang that found no lower tier's reservation to take over
        self.no_take_over_min: dict[tuple, int] = {}
        self.plain_reasons: dict[tuple, PendingReason] = {}  # job shape -> reason (no estimate)

    # -- the walk ---------------------------------------------------------------------------

    def run(self) -> Decisions:
        if self.fleet == 0:  # no node takes work: every job waits for one, no walk needed
            explain.no_capacity(self)
            return self.out
        if self.snap.holds:
            kept.keep_holds(self)
        while not walk_end.exhausted(self):
            job = self.queue.pop()
            if job is None:
                break
            if self.after_block is not None:
                self.after_block += 1
            if job.job_id in self.kept:
                self._kept(job)
            else:
                self._consider(job)
        explain.explain_rest(self)
        self.out.capacity_advice = {t: n for t, n in self.short.items() if n > 0}
        return self.out

    def _consider(self, job: QueuedJob) -> None:
        capped = caps.cap_reason(self, job)
        if capped is not None:
            self._pending(job, capped, count_short=False)
            return
        groups = self.index.matching(job)
        if not self._can_fit(job, groups):
            ever = self.index.matching_ever(job)
            if ever is groups or not self._can_fit(job, ever):
                self._pending(job, explain.no_fit(self, job, ever), count_short=False)
            elif not self._run_till_window(job):
                # only nodes that leave service before its time limit ends could hold it
                self._pending(job, explain.windows_in_way(self, job))
            return
        alloc = self._place_now(job, groups)
        if alloc is not None:
            self._commit(job, alloc)
        elif not self._run_till_window(job):
            self._blocked(job, groups)

    def over_cap(self, job: QueuedJob) -> bool:
        return caps.over_cap(self, job)

    def _can_fit(self, job: QueuedJob, groups: Pools) -> bool:
        """Whether some node or island of the pools (a list the index matched, kept for the
        round) could hold the job when idle."""
        key = (id(groups), job.gpus)
        ok = self.fits.get(key)
        if ok is None:
            ok = self.fits[key] = bool(groups) and self.index.can_ever_fit(
                groups, job.gpus, self.cfg.span_nodes)
        return ok

    # -- reservations kept from the previous round (kept.py) ------------------------------

    def _hold(self, job: QueuedJob, start: float, plan: dict[str, int],
              from_last_round: bool = False) -> Hold:
        for node in plan:  # a lower tier's reservation on these nodes gives way
            other = self.timeline.hold_of.get(node)
            if other is not None:
                self._give_up(other)
        hold = self.timeline.reserve(job.job_id, start, plan, self.levels[job.tier],
                                     kept=from_last_round)
        self.no_take_over_min.clear()  # new idle reserved GPUs
        self.reserved_gpus += sum(plan.values())
        self.out.reservations.append(Reservation(job.job_id, hold.allocations(), start))
        return hold

    def _kept(self, job: QueuedJob) -> None:
        """The walk reached a job handled before it: started, still holding, or taken over."""
        hold = self.kept[job.job_id]
        if hold is None:
            return
        if hold not in self.timeline.holds:  # a higher tier took its reservation over
            self._consider(job)
            return
        if self.after_block is None:
            self.after_block = 0
        self.waiting_levels.setdefault(self.levels[job.tier], job.tier)
        # only single-node gangs keep a reservation (kept.py)
        reason = reasons.resources(job, self.now, False, list(hold.gpus), hold.start_at, "")
        self._pending(job, reason, start=hold.start_at)

    def _give_up(self, hold: Hold) -> None:
        """Cancel a reservation: its idle GPUs are free again, for every gang size."""
        self.timeline.cancel(hold)
        self.no_free_min.clear()

    # -- starting now -----------------------------------------------------------------------

    def _place_now(self, job: QueuedJob, groups: Pools) -> tuple[Allocation, ...] | None:
        key = self.index.pool_key(job)
        level = self.levels[job.tier]
        ends = self.now + (job.expected_duration_s or job.time_limit_s)
        guard = yielding.guard(self, job, level)
        self.guarded = False
        # free GPUs only shrink during a round (but see _give_up): a gang that found nothing
        # stays unplaceable
        if job.gpus < self.no_free_min.get(key, 1 << 30):
            if guard is None:
                alloc = self.index.allocate(groups, job.gpus, level, job.avoid)
            else:
                alloc = yielding.guarded_allocate(self, groups, job.gpus, level, ends, guard)
                self.guarded = alloc is None
            if alloc is not None:
                return alloc
            if guard is None:
                self.no_free_min[key] = job.gpus
        if self.timeline.holds:
            lent = self.timeline.borrow(groups, job.gpus, ends, self.now + job.time_limit_s)
            if lent is not None:
                self.guarded = False
                return (lent,)
            if guard is None and job.gpus <= self.index.largest(groups):
                return kept.take_over(self, groups, job.gpus, level, key)
        return None

    def _run_till_window(self, job: QueuedJob) -> bool:
        """Start a job that checkpoints, and that nothing else holds now, on nodes whose
        maintenance window comes before its time limit ends: it runs till then and moves,
        where the GPUs would idle (only where no higher tier's blocked gang is guarded). Not
        a job that its tier or its own flag keeps from being stopped."""
        tier = self.snap.tiers.get(job.tier)
        if not (job.checkpointable and job.preemptible and self.index.windows
                and tier is not None and tier.preemptible):
            return False
        groups = self.index.windows_to_run_in(job, self.cfg.window_run_s)
        level = self.levels[job.tier]
        if not groups or yielding.guard(self, job, level) is not None:
            return False
        alloc = self.index.allocate(groups, job.gpus, level, job.avoid)
        if alloc is None:
            return False
        self._commit(job, alloc)
        return True

    def _commit(self, job: QueuedJob, alloc: tuple[Allocation, ...], preempted=False) -> None:
        self.out.placements.append(Placement(job.job_id, alloc, preempted))
        self.shares.add(job, job.gpus)
        end = self.now + (job.expected_duration_s or job.time_limit_s)
        level = self.levels[job.tier]
        for a in alloc:
            self.timeline.occupy(a.node, a.gpus, end)
            self.index.raise_label(a.node, level)
        self.queue.charged(job)

    # -- blocked: preempt, reserve, explain -------------------------------------------------

    def _blocked(self, job: QueuedJob, groups: Pools) -> None:
        if self.after_block is None:
            self.after_block = 0
        level = self.levels[job.tier]
        self.waiting_levels.setdefault(level, job.tier)
        if self.guarded:
            self.guarded = False
            yielding.remember_blocked(self, job, level)
            self._pending(job, yielding.reason(self, job))
            return
        span = job.gpus > self.index.largest(groups)
        explained = self.explained
        est = self._earliest(job, groups, span)
        if self._may_preempt(job, est) and self._preempt(job, groups, est):
            return
        # a what-if only for the jobs explained in full, as for the estimate
        what_if = (explain.what_if(self.index, job, groups, self.cfg.span_nodes)
                   if self.explained > explained else "")
        if est is not None and self._may_reserve(job):
            if not what_if:  # against the start its reservation promises
                what_if = explain.sooner(self, job, groups, est[0])
            hold = self._hold(job, est[0], est[1])
            nodes = list(hold.gpus)
            reason = reasons.resources(job, self.now, span, nodes, est[0], what_if)
        else:
            start = est[0] if est is not None else None
            if start is None and not what_if:  # most of a long walk: one shared object
                reason = reasons.unestimated(job, self.now, span, self.plain_reasons)
            else:
                reason = reasons.resources(job, self.now, span, None, start, what_if)
            yielding.remember_blocked(self, job, level)
        self._pending(job, reason, start=est[0] if est is not None else None)

    def _may_reserve(self, job: QueuedJob) -> bool:
        """Every blocked job reserves, in rank order, while the reservation budget lasts."""
        holds = len(self.timeline.holds)
        if holds < self.cfg.max_reservations:
            return True
        if holds >= self.cfg.max_budget_reservations:
            return False
        return self.reserved_gpus + job.gpus <= self.reserve_cap

    def _earliest(
        self, job: QueuedJob, groups: Pools, span: bool
    ) -> tuple[float, dict[str, int]] | None:
        """Earliest GPUs for the job from running ends; only for jobs we explain in full.

        A job that may preempt always gets one: hysteresis weighs the kill against it, and
        a missing estimate reads as "never", which would kill for GPUs freeing up next second.
        """
        if (not self._may_reserve(job) and self.explained >= self.cfg.max_explained
                and not self._can_preempt(job)):
            return None
        self.explained += 1
        if span:
            return self.timeline.earliest_island(groups, job.gpus)
        found = self.timeline.earliest(groups, job.gpus)
        lower = kept.lower_held(self, groups, job.gpus, self.levels[job.tier])
        if lower is not None and (found is None or lower[0] < found[0]):
            found = lower
        return None if found is None else (found[0], {found[1]: job.gpus})

    def _can_preempt(self, job: QueuedJob) -> bool:
        """Victim searches are left this round and some attempt ranks below the job."""
        return (self.preempt_tries < self.cfg.max_preemptors_per_round
                and self.levels[job.tier] > self.victims.min_level)

    def _may_preempt(self, job: QueuedJob, est: tuple[float, dict] | None) -> bool:
        if not self._can_preempt(job):
            return False
        tier = self.snap.tiers[job.tier]
        natural = est[0] if est is not None else _INF
        # hysteresis: no kill when enough GPUs free up soon anyway; a start SLO shorter than
        # the window shrinks it, or waiting alone would miss the SLO
        if natural <= self.now + min(self.cfg.hysteresis_s, tier.start_slo_s / 2):
            return False
        if self.queue.below_floor(job.tier):
            return True
        deadline = job.enqueued_at + tier.start_slo_s
        return natural > deadline and self.now + self.cfg.slo_lead_s >= deadline

    def _preempt(self, job: QueuedJob, groups: Pools, est: tuple[float, dict] | None) -> bool:
        key = (*self.index.pool_key(job), self.levels[job.tier])
        if job.gpus >= self.no_victims_min.get(key, 1 << 30):
            return False
        self.preempt_tries += 1
        room = {t: self.shares.tier[t] - self.floors[t] for t in self.snap.tiers}
        budget = self.cfg.preemption_budget_per_org - self.budget_used[job.org]
        level = self.levels[job.tier]
        skip, extra = set(), {}
        for node, hold in self.timeline.hold_of.items():
            if hold.level >= level:
                skip.add(node)
            else:  # a lower tier's reservation gives way: its idle GPUs count as free
                extra[node] = len(hold.free_now.get(node, ()))
        # a kill must not lose far more work than the preemptor's GPUs would wait
        natural = est[0] if est is not None else _INF
        max_cost = loss_bound(self.cfg, self.snap.tiers[job.tier].start_slo_s, job, natural,
                              self.now, first=not self.out.preemptions)
        plan = self.victims.plan(groups, job.gpus, level, skip, room, budget, max_cost, extra)
        if plan is None:
            if max_cost == _INF:
                self.no_victims_min[key] = job.gpus
            return False
        self._apply(job, plan)
        return True

    def _apply(self, job: QueuedJob, plan: Plan) -> None:
        taken: dict[str, set[int]] = {}
        for node, k in plan.parts.items():
            hold = self.timeline.hold_of.get(node)
            if hold is not None:
                self._give_up(hold)
            own = self.index.free[node][:k]
            if own:
                self.index.take_exact(node, own)
            gpus = list(own)  # its own free GPUs first: they already left the index
            for v in plan.victims:
                gpus.extend(v.gpus_on(node))
            taken[node] = set(gpus[:k])
        slack = job.enqueued_at + self.snap.tiers[job.tier].start_slo_s - self.now
        for v in plan.victims:
            v.gone = True
            run = v.run
            grace = grace_s(run, self.now, self.cfg, slack)
            self.out.preemptions.append(Preemption(run.attempt_id, run.job_id, job.job_id, grace))
            self.shares.add(run, -run.gpus)
            self.timeline.release_early(run, self.now + grace, taken)
            self.queue.charged_org(run.org)
        self.budget_used[job.org] += len(plan.victims)
        alloc = tuple(Allocation(node, tuple(sorted(gpus))) for node, gpus in taken.items())
        self._commit(job, alloc, preempted=True)

    # -- reasons for everyone else ----------------------------------------------------------

    def _pending(
        self, job: QueuedJob, reason: PendingReason, *, start=None, count_short=True
    ) -> None:
        self.out.pending[job.job_id] = reason
        if count_short:
            deadline = job.enqueued_at + self.snap.tiers[job.tier].start_slo_s
            if (start if start is not None else self.now) > deadline:
                self.short[job.gpu_types[0] if job.gpu_types else "any"] += job.gpus
