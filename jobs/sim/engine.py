"""The discrete-event engine: arrivals, scheduling rounds, starts, ends, preemptions, failures.

Virtual time in seconds. A scheduling round builds a `Snapshot`, calls the policy and applies
its decisions. Rounds run after events (at most one per `round_interval`) and every `period`
seconds while jobs are queued (aging and usage decay change decisions without events).

Preemption: the victim keeps its GPUs for its grace, then stops; work since its last
checkpoint is lost, it is re-queued and pays `restore_cost` seconds on its GPUs when it
resumes from a checkpoint. During the grace the victim is shown to the policy with
`expected_end = time_limit_end = stop time`. A placement marked `preempted=True` on GPUs still
held by attempts being preempted is a nomination: the job starts as soon as all its GPUs are
free, and nothing else is offered those GPUs. Checkpoints (with `checkpoint_interval` > 0)
happen every `checkpoint_interval` seconds of progress. Node failures (`node_failure_rate` per
node-hour, exponential) lose the attempts on the node; the node returns after `repair_s`.
Binary crashes (`crash_rate` per GPU-hour of running, exponential: a gang's try ends when any
of its GPUs' does) end a try early. As in the service (workers/services/retries.py), a lost
or crashed try counts against the job's `max_retries`: the job waits `retry_backoff_s`,
doubling each retry (at most 10 min), then queues again to resume from its last checkpoint,
a crashed one on another node where one fits now; past its budget it is dead (no end).
"""

from __future__ import annotations

import math
import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from jobs.policy.types import (
    Allocation,
    Decisions,
    PolicyConfig,
    QueuedJob,
    Snapshot,
    TierSpec,
)

from .estimates import note_line, note_reservations
from .events import EventQueue
from .failures import Failures
from .ledger import Ledger
from .model import Maintenance, NodeSpec, SimJob, default_tiers
from .runtimes import LearnedRunTimes
from .view import build_snapshot

_LOST = {"preempt": "preempt_lost", "maintenance": "maintenance_lost",
         "evacuate": "maintenance_lost"}  # else failure_lost


@dataclass(slots=True)
class _Node:
    spec: NodeSpec
    up: bool = True
    free: set[int] = field(default_factory=set)
    nominated: set[int] = field(default_factory=set)


@dataclass(slots=True)
class _Attempt:
    id: int
    job: SimJob
    allocs: tuple[Allocation, ...]
    start: float
    restore: float
    end_at: float
    stop_at: float | None = None
    stopped_for: tuple[str, int] | None = None  # the preemptor's tier and GPUs
    crash_at: float | None = None  # when its binary crashes, if before its end

    @property
    def gpus(self) -> int:
        return self.job.gpus


@dataclass(slots=True)
class SimResult:
    jobs: list[SimJob]
    tiers: dict[str, TierSpec]
    org_weights: dict[str, float]
    fleet_gpus: int
    end_time: float
    stats: dict[str, float]
    tier_acc: dict[str, dict[str, float]]
    org_acc: dict[str, dict[str, float]]
    decision_ms: list[float]
    notes: list[str]
    # (preemptor tier, its GPUs, victim tier, victim GPUs) -> [victims, GPU-seconds lost]
    loss_by: dict[tuple[str, int, str, int], list[float]] = field(default_factory=dict)


class Simulator(Failures):
    def __init__(self, fleet: list[NodeSpec], jobs: list[SimJob],
                 policy: Callable[[Snapshot], Decisions], tiers: dict[str, TierSpec] | None = None,
                 *, config: PolicyConfig | None = None, checkpoint_interval: float = 0.0,
                 restore_cost: float = 30.0, node_failure_rate: float = 0.0,
                 repair_s: float = 1800.0, crash_rate: float = 0.0, max_retries: int = 3,
                 retry_backoff_s: float = 5.0, seed: int = 0, round_interval: float = 1.0,
                 period: float = 10.0, max_time: float = math.inf,
                 org_weights: dict[str, float] | None = None, line_every: float = 0.0,
                 learner: LearnedRunTimes | None = None,
                 maintenance: Maintenance | None = None) -> None:
        self.policy = policy
        self.maintenance = maintenance
        self.learner = learner  # run times for the jobs without an estimate (None: limits)
        self.line_every = line_every  # draw the queue line this often (0: never)
        self.next_line = 0.0
        self.tiers = tiers or default_tiers()
        self.config = config or PolicyConfig()
        self.jobs = sorted(jobs, key=lambda j: (j.submit, j.job_id))
        self.nodes = {s.name: _Node(s, True, set(range(s.gpus))) for s in fleet}
        self.ckpt = checkpoint_interval
        self.restore_cost = restore_cost
        self.fail_rate = node_failure_rate / 3600.0
        self.repair_s = repair_s
        self.crash_rate = crash_rate / 3600.0
        self.max_retries, self.retry_backoff_s = max_retries, retry_backoff_s
        self.retrying = 0  # jobs waiting out a retry's backoff
        self.rng = random.Random(seed)
        self.crash_rng = random.Random(f"crashes-{seed}")  # node failures draw as before
        self.round_interval = round_interval
        self.period = period
        self.max_time = max_time
        self.window_end = self.jobs[-1].submit if self.jobs else 0.0
        self.org_weights = dict(org_weights or {})
        self.events = EventQueue()
        self.now = 0.0
        self.queued: dict[int, SimJob] = {}
        self.qviews: dict[int, QueuedJob] = {}
        self.nominated: dict[int, tuple[SimJob, tuple[Allocation, ...]]] = {}
        self.holds: dict[int, dict[str, int]] = {}  # the last round's reservations
        self.attempts: dict[int, _Attempt] = {}
        self.owner: dict[tuple[str, int], int] = {}
        self._next_attempt = 1
        self.next_round: float | None = None
        self.last_round = -math.inf
        self.arrivals_left = len(self.jobs)
        self.down = 0
        self.done = 0
        self.fleet_gpus = sum(s.gpus for s in fleet)
        self.ledger = Ledger(self.fleet_gpus, self.window_end, self.org_weights,
                             self.config.usage_half_life_s)
        self.stats = self.ledger.stats
        self.decision_ms: list[float] = []
        self.notes: list[str] = []
        self.loss_by: dict[tuple[str, int, str, int], list[float]] = {}

    def _request_round(self, t: float) -> None:
        if self.next_round is None or t < self.next_round:
            self.next_round = t
            self.events.push(t, "round", t)

    # ----------------------------------------------------------------- job life
    def _enqueue(self, job: SimJob, t: float) -> None:
        job.queued_since = t
        self.queued[job.job_id] = job
        self.qviews[job.job_id] = QueuedJob(
            job.job_id, job.org, job.tier, job.gpus, t, job.time_limit,
            expected_duration_s=job.expected_duration, gpu_types=job.gpu_types,
            min_gpu_memory_mb=job.min_gpu_memory_mb, project=job.project, user=job.user,
            preemptions=job.preemptions, checkpointable=self.ckpt > 0, avoid=job.avoid)
        self.ledger.waiting_delta(job, +1)

    def _start(self, job: SimJob, allocs: tuple[Allocation, ...], t: float) -> None:
        if job.job_id in self.queued:
            del self.queued[job.job_id]
            del self.qviews[job.job_id]
        else:
            self.nominated.pop(job.job_id)
        self.ledger.waiting_delta(job, -1)
        job.queued_total += t - (job.queued_since or t)
        job.queued_since = None
        restore = self.restore_cost if job.saved > 0 else 0.0
        if restore:
            self.stats[_LOST.get(job.restore_due, "failure_lost")] += restore * job.gpus
        att = _Attempt(self._next_attempt, job, allocs, t, restore,
                       t + restore + max(0.0, job.duration - job.saved))
        self._next_attempt += 1
        self.attempts[att.id] = att
        for a in allocs:
            node = self.nodes[a.node]
            for g in a.gpus:
                node.free.discard(g)
                node.nominated.discard(g)
                self.owner[(a.node, g)] = att.id
        self.ledger.running_delta(job, job.gpus, self.now)
        if job.first_start is None:
            job.first_start = t
        job.attempts += 1
        self.events.push(att.end_at, "end", att.id)
        self._draw_crash(att)

    def _release(self, att: _Attempt) -> None:
        del self.attempts[att.id]
        for a in att.allocs:
            node = self.nodes[a.node]
            for g in a.gpus:
                self.owner.pop((a.node, g), None)
                if node.up:
                    node.free.add(g)
        self.ledger.running_delta(att.job, -att.gpus, self.now)
        for job, allocs in list(self.nominated.values()):
            if all(g in self.nodes[a.node].free for a in allocs for g in a.gpus):
                self._start(job, allocs, self.now)

    def _end(self, att: _Attempt) -> None:
        job = att.job
        job.saved, job.end = job.duration, self.now
        self.done += 1
        if self.learner is not None:
            self.learner.learn(job)
        self._release(att)

    def _stop(self, att: _Attempt, cause: str) -> None:
        job, t = att.job, self.now
        progress = max(0.0, t - att.start - att.restore)
        kept = math.floor(progress / self.ckpt) * self.ckpt if self.ckpt > 0 else 0.0
        lost = (progress - kept) * att.gpus
        self.stats[_LOST.get(cause, "failure_lost")] += lost  # a crash's too
        if cause == "preempt":
            by = att.stopped_for or ("?", 0)
            row = self.loss_by.setdefault((*by, job.tier, att.gpus), [0, 0.0])
            row[0] += 1
            row[1] += lost
        job.saved = min(job.duration, job.saved + kept)
        if job.saved > 0:
            job.restore_due = cause
        if cause in ("maintenance", "evacuate"):
            self.stats["maintenance_stopped"] += 1
        if cause in ("preempt", "evacuate"):  # it waits again; an evacuation spends no retry
            job.preemptions += 1  # but counts against its cap, as the service's does
            if cause == "preempt":
                self.stats["preemptions"] += 1
            self._release(att)
            self._enqueue(job, t)
            return
        job.failures += 1
        self._release(att)
        self._retry_or_dead(job, att.allocs[0].node if cause == "crash" else "")

    def _idle_before_maintenance(self, a: float, b: float) -> None:
        """GPU-seconds the maintained nodes sit free between its notice and its hour."""
        span = self.maintenance.idle_span(a, b)
        if span > 0:
            free = sum(len(self.nodes[n].free) for n in self.maintenance.nodes if n in self.nodes)
            self.stats["maintenance_idle"] += span * free

    # ----------------------------------------------------------------- rounds
    def snapshot(self) -> Snapshot:
        return build_snapshot(self)

    def _unestimated(self) -> list[SimJob]:
        """The live jobs that came without an estimate (`--estimates learned`)."""
        live = [*self.queued.values(), *(a.job for a in self.attempts.values()),
                *(job for job, _ in self.nominated.values())]
        return [job for job in live if job.extra.get("unestimated")]

    def _round(self) -> None:
        self.last_round = self.now
        self.stats["rounds"] += 1
        if self.learner is not None:
            self.learner.apply(self._unestimated(), self.qviews)
        snap = self.snapshot()
        t0 = time.perf_counter()
        dec = self.policy(snap)
        self.decision_ms.append((time.perf_counter() - t0) * 1000.0)
        self.holds = dec.next_holds()
        note_reservations(self.queued, dec)
        for p in dec.preemptions:
            att = self.attempts.get(p.attempt_id)
            if att is None or att.stop_at is not None:
                continue
            spec = self.tiers.get(att.job.tier)
            if spec is not None and not spec.preemptible:
                self.stats["nonpreemptible_victims"] += 1
            preemptor = self.queued.get(p.for_job_id)
            if preemptor is not None:
                att.stopped_for = (preemptor.tier, preemptor.gpus)
            stop_at = self.now + max(0.0, p.grace_s)
            if stop_at >= att.end_at:
                att.stop_at = att.end_at  # ends first: its GPUs may be nominated, no stop
                continue
            att.stop_at = stop_at
            if stop_at <= self.now:
                self._stop(att, "preempt")
            else:
                self.events.push(stop_at, "stop", att.id)
        placed = set()
        for p in dec.placements:
            job = self.queued.get(p.job_id)
            if job is None or not self._apply(job, p.allocations):
                self.stats["invalid_placements"] += 1
                if len(self.notes) < 20:
                    self.notes.append(f"t={self.now:.0f} invalid placement {p}")
                continue
            placed.add(p.job_id)
        if self.line_every and self.now >= self.next_line:
            self.next_line = self.now + self.line_every
            note_line(self.queued, snap, placed, self.now)
        # judged on the queue the policy saw: a victim re-queued just now had no say yet
        missing = [q.job_id for q in snap.queued
                   if q.job_id not in dec.pending and q.job_id not in placed]
        self.stats["missing_reasons"] += len(missing)
        if self.queued:
            self._request_round(self.now + self.period)
            stuck = not self.attempts and not self.nominated and not placed
            if stuck and not self.arrivals_left and not self.down and not self.retrying:
                self.stats["stalled"] = 1
                self.notes.append(f"t={self.now:.0f} stalled: {len(self.queued)} jobs queued, "
                                  "nothing running and the policy places nothing")

    def _apply(self, job: SimJob, allocs: tuple[Allocation, ...]) -> bool:
        seen, wait = set(), False
        if sum(len(a.gpus) for a in allocs) != job.gpus:
            return False
        for a in allocs:
            node = self.nodes.get(a.node)
            if node is None or not node.up:
                return False
            for g in a.gpus:
                if (a.node, g) in seen or g in node.nominated or not 0 <= g < node.spec.gpus:
                    return False
                seen.add((a.node, g))
                if g in node.free:
                    continue
                owner = self.attempts.get(self.owner.get((a.node, g), -1))
                if owner is None or owner.stop_at is None:
                    return False
                wait = True
        if not wait:
            self._start(job, allocs, self.now)
            return True
        del self.queued[job.job_id]
        del self.qviews[job.job_id]
        self.nominated[job.job_id] = (job, allocs)
        job.extra["nominated_at"] = self.now
        for a in allocs:
            self.nodes[a.node].nominated.update(a.gpus)
        return True

    # ----------------------------------------------------------------- run
    def run(self) -> SimResult:
        for job in self.jobs:
            self.events.push(job.submit, "arrival", job)
        if self.jobs:
            self.now = self.jobs[0].submit
        for name in self.nodes:
            self._schedule_failure(name)
        if self.maintenance is not None:
            self._request_round(max(self.now, self.maintenance.at - self.maintenance.notice))
            self.events.push(self.maintenance.at, "maintenance", None)
        while self.events and self.done < len(self.jobs) and not self.stats["stalled"]:
            t = self.events.peek_time()
            if t > self.max_time:
                break
            self.ledger.advance(self.now, t)
            if self.maintenance is not None:
                self._idle_before_maintenance(self.now, t)
            self.now = max(self.now, t)
            t, kind, payload = self.events.pop()
            if kind == "round":
                if payload == self.next_round:
                    self.next_round = None
                    self._round()
                continue
            if kind == "arrival":
                self.arrivals_left -= 1
                self.ledger.org_usage.at(payload.org, t)
                self._enqueue(payload, t)
            elif kind == "end":
                att = self.attempts.get(payload)
                if att is None or att.end_at != t:
                    continue
                self._end(att)
            elif kind == "stop":
                att = self.attempts.get(payload)
                if att is None or att.stop_at != t:
                    continue
                self._stop(att, "preempt")
            elif kind == "crash":
                self._crash(payload, t)
            elif kind == "retry":
                self.retrying -= 1
                self._enqueue(payload, t)
            elif kind == "fail":
                if self.done >= len(self.jobs):
                    continue
                self._fail(payload)
            elif kind == "repair":
                self._repair(payload)
            elif kind == "maintenance":
                for name in self.maintenance.nodes:
                    self._maintain(name)
            self._request_round(max(t, self.last_round + self.round_interval))
        return SimResult(self.jobs, self.tiers, self.org_weights, self.fleet_gpus, self.now,
                         self.stats, self.ledger.tier_acc, self.ledger.org_acc,
                         self.decision_ms, self.notes, self.loss_by)
