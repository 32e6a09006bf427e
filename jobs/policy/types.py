"""Plain data the scheduling policy reads and writes.

Nothing here imports Django: the service's tick and the simulator build the same
snapshot and call the same `decide`. All times are seconds (float, any epoch).

RECORDS: the records a snapshot is made of by the thousand (nodes, allocations, running
attempts, queued jobs) are not frozen dataclasses. A tick builds one per queued job, 50,000
of them a second at scale, and a frozen dataclass sets each field through
`object.__setattr__`: 2.3 us a job against 0.35. The policy never changes them;
`tests/unit/policy/test_policy_properties.py` checks that `decide` leaves its snapshot as
it was.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import repeat
from operator import attrgetter


@dataclass(frozen=True, slots=True)
class TierSpec:
    name: str
    priority: int  # higher wins
    weight: float = 1.0  # fair-share weight of the tier
    guaranteed_share: float = 0.0  # floor, fraction of the fleet's GPUs
    max_share: float = 1.0  # burst ceiling, fraction of the fleet's GPUs
    start_slo_s: float = 3600.0  # target wait before start
    preemptible: bool = True  # may its running attempts be preempted
    max_preemptions: int = 3  # per job


@dataclass(slots=True)  # not frozen: RECORDS, above
class NodeView:
    name: str
    gpu_type: str
    gpu_memory_mb: int
    total_gpus: int
    free_gpus: tuple[int, ...]  # indices of healthy, unbound GPUs
    region: str = ""
    island: str = ""  # rack / NVLink island: multi-node gangs stay inside one
    schedulable: bool = True  # False when cordoned, draining or down
    # leaves service at this time (a maintenance window): only a job whose time limit ends
    # by then starts on it, and nothing reserves it or preempts on it (placement.py)
    until: float | None = None
    back_at: float | None = None  # when its maintenance ends (pending reasons only)
    # the organization it is dedicated to ("": shared): only that one's jobs start on it,
    # and they look at it before shared nodes (placement.py)
    owner: str = ""
    # the organization it is dedicated to from `until` on: its jobs are not held to that
    # window, as every other's are (a dedication ahead, as a maintenance window)
    upcoming: str = ""


@dataclass(slots=True)  # not frozen: RECORDS, above
class Allocation:
    node: str
    gpus: tuple[int, ...]


@dataclass(slots=True)  # not frozen: RECORDS, above
class RunningView:
    attempt_id: int
    job_id: int
    org: str
    tier: str
    allocations: tuple[Allocation, ...]
    started_at: float
    expected_end: float  # predicted end, never later than time_limit_end
    time_limit_end: float
    last_checkpoint_at: float | None = None
    checkpointable: bool = False
    preemptible: bool = True  # the job's own flag; the tier's flag also applies
    preemptions: int = 0  # how often this job was preempted so far
    project: str = ""
    checkpoint_interval_s: float | None = None  # known cadence of checkpoints, if any
    user: str = ""  # who submitted the job ("" where nobody is known)

    @property
    def gpus(self) -> int:
        return sum(len(a.gpus) for a in self.allocations)

    def predicted_end(self, now: float) -> float:
        """`expected_end`, or for an attempt already past it, as long again as it overran.

        An overrun shows the estimate was short; taking the attempt as "ending now" would
        keep a gang waiting (no preemption, since GPUs free "now") round after round.
        """
        if self.expected_end > now:
            return self.expected_end
        return min(self.time_limit_end, 2 * now - self.expected_end)


@dataclass(slots=True)  # not frozen: RECORDS, above
class QueuedJob:
    job_id: int
    org: str
    tier: str
    gpus: int
    enqueued_at: float  # start of the current wait (aging anchor)
    time_limit_s: float
    expected_duration_s: float | None = None  # user estimate or history; None: use the limit
    gpu_types: tuple[str, ...] = ()  # preference order; empty: any type
    min_gpu_memory_mb: int = 0
    region: str = ""  # empty: any region
    project: str = ""
    user: str = ""  # who submitted the job ("" where nobody is known)
    preemptions: int = 0
    checkpointable: bool = False
    min_gpus: int | None = None  # the job accepts fewer GPUs, down to this (what-if only)
    # goes ahead of its user's jobs in the project as if submitted this much earlier
    # (queues.by_project); never ahead of anyone else's
    urgency_s: float = 0.0
    avoid: str = ""  # a node its last try failed on: another that fits now goes first
    preemptible: bool = True  # the job's own flag: False, nothing stops it before its end


@dataclass(frozen=True, slots=True)
class PolicyConfig:
    usage_half_life_s: float = 6 * 3600.0
    aging_per_hour: float = 1.0  # rank points gained per hour of wait
    max_age_boost: float = 1_000.0
    min_runtime_before_preempt_s: float = 0.0  # see docs/policy.md
    restart_cost_s: float = 30.0  # per GPU, charged as lost work for a victim
    preempt_grace_max_s: float = 120.0
    # a victim that checkpoints when signalled gets at least this long (preemption.grace_s)
    signal_grace_s: float = 10.0
    # a blocked job does not preempt when its GPUs free up this soon (at most half its start
    # SLO): paid waits up to 2 min rather than kill work, enterprise (SLO 30 s) up to 15 s
    hysteresis_s: float = 120.0
    spare_ending_within_s: float = 60.0  # an attempt expected to end this soon is no victim
    preemption_budget_per_org: int = 16  # per decision round
    backfill_depth: int = 2_000  # queued jobs considered after the head is blocked
    tier_gap: float = 8.0  # rank points between adjacent tier levels (aging: see ranking.py)
    max_reservations: int = 8  # blocked jobs that hold a reservation per round
    max_preemptors_per_round: int = 8  # blocked jobs that may look for victims per round
    near_finish_s: float = 600.0  # victims closer than this to their end cost more
    slo_lead_s: float = 120.0  # preempt for a start SLO this long before it is missed
    preempt_scan_nodes: int = 64  # candidate nodes per GPU type a victim search tries
    max_explained: int = 256  # blocked jobs per round that get an estimate and a what-if
    # blocked jobs beyond max_reservations still reserve while all reservations together hold
    # at most this fraction of the schedulable GPUs
    reserve_share: float = 0.5
    max_budget_reservations: int = 64  # at most this many reservations a round in all
    # a job that waited this fraction of its tier's start SLO goes oldest first in its tier
    # (None: fair share only)
    late_fraction: float | None = None
    # a job that waited this long goes first in its tier, whatever its org's share
    starve_after_s: float | None = 12 * 3600.0
    # a preemption plan may cost (victim cost, see preemption.py) at most this times the
    # GPU-time the preemptor would otherwise wait (gpus x time to its natural start)
    preempt_loss_ratio: float = 1.0
    # the same bound, looser, on a round's first kill (None: none), while waiting would start
    # the preemptor at most `first_kill_bound_slos` of its start SLOs after its deadline
    first_kill_loss_ratio: float | None = 16.0
    first_kill_bound_slos: float = 10.0
    # nodes a lower-tier job tries before it yields to a blocked higher-tier gang
    guard_scan_nodes: int = 32
    # a kept reservation moves to another node only when that one frees up this much sooner
    hold_move_s: float = 60.0
    # a reservation is kept across rounds once its job waited this fraction of its start SLO
    keep_after_slo_fraction: float = 1.0
    # inside a project jobs go by virtual deadline, enqueued_at + limit_weight x time limit:
    # the shortest first among jobs of one age, and none overtaken by a job submitted after
    # its own deadline (0: oldest first)
    limit_weight: float = 10.0
    # a gang larger than a node may take nodes of one island; where attempts run on one node
    # (the service), such a gang waits with reason "no_fit" instead
    span_nodes: bool = True
    # a job that checkpoints and may be stopped may start on a node whose maintenance window
    # comes before its time limit ends, where no other node holds it now, if it can run this
    # long first: at the window it checkpoints and resumes elsewhere (the service evacuates
    # it) instead of the GPUs idling till then; inf: only jobs whose limit ends by the window
    window_run_s: float = 600.0


@dataclass(slots=True)
class Snapshot:
    now: float
    nodes: list[NodeView]
    running: list[RunningView]
    queued: list[QueuedJob]
    tiers: dict[str, TierSpec]
    usage: dict[str, float] = field(default_factory=dict)  # org -> decayed GPU-seconds
    project_usage: dict[tuple[str, str], float] = field(default_factory=dict)
    # (org, project, user) -> decayed GPU-seconds; users share a project by `user_weights`
    user_usage: dict[tuple[str, str, str], float] = field(default_factory=dict)
    org_weights: dict[str, float] = field(default_factory=dict)  # default 1.0
    project_weights: dict[tuple[str, str], float] = field(default_factory=dict)  # default 1.0
    # (org, user) -> weight of the user's share inside each project of the org (default 1.0)
    user_weights: dict[tuple[str, str], float] = field(default_factory=dict)
    org_gpu_caps: dict[str, int] = field(default_factory=dict)  # running-GPU cap per org
    # (org, project) -> running-GPU cap of the project, inside its org's
    project_gpu_caps: dict[tuple[str, str], int] = field(default_factory=dict)
    # (org, user) -> running-GPU cap of a member, over all the org's projects, inside its org's
    user_gpu_caps: dict[tuple[str, str], int] = field(default_factory=dict)
    # the previous round's reservations (job id -> GPUs per node): honoured before the walk,
    # so GPUs drained for a gang are not refilled by jobs ranked ahead of it (gpusched.py)
    holds: dict[int, dict[str, int]] = field(default_factory=dict)
    config: PolicyConfig = field(default_factory=PolicyConfig)
    # `queued` is already in virtual-deadline order for config.limit_weight (the tick loads
    # it so): the round need not compute 50,000 keys to check it (deadlines.virtual_deadlines)
    queue_sorted: bool = False

    def fleet_gpus(self) -> int:
        """GPUs of the nodes that take work: what floors, backlogs and the line divide by."""
        return sum(n.total_gpus for n in self.nodes if n.schedulable)


@dataclass(frozen=True, slots=True)
class Placement:
    job_id: int
    allocations: tuple[Allocation, ...]
    preempted: bool = False  # True when it uses GPUs freed by preemption this round


@dataclass(frozen=True, slots=True)
class Preemption:
    attempt_id: int
    job_id: int
    for_job_id: int
    grace_s: float  # time the victim has to checkpoint before it is killed


@dataclass(frozen=True, slots=True)
class Reservation:
    job_id: int
    allocations: tuple[Allocation, ...]
    start_at: float


@dataclass(frozen=True, slots=True)
class PendingReason:
    code: str  # machine-readable, e.g. "resources", "org_cap", "tier_share"
    text: str  # for people
    estimated_start: float | None = None
    what_if: str = ""  # a relaxation that would start the job sooner, if any


_JOB_ID = attrgetter("job_id")


class PendingReasons(Mapping[int, PendingReason]):
    """Every waiting job's reason: set job by job, or for runs of jobs that share one.

    Past the part of the queue a round looks at, thousands of jobs share a handful of
    reasons. A run is the tail of a list of queued jobs, kept as the list and where the tail
    starts: the round pays nothing per job for it (a dict entry per job was a quarter of a
    round at 50,000 queued), and the service writes each run with one UPDATE. A job set on
    its own wins over its run; a job marked placed is left out of its run. Reading a single
    job builds the per-job index once.
    """

    __slots__ = ("own", "_runs", "_placed", "_index")

    def __init__(self, own: Mapping[int, PendingReason] | None = None) -> None:
        self.own: dict[int, PendingReason] = dict(own or {})  # the jobs answered one by one
        self._runs: list[tuple[Sequence[QueuedJob], int, PendingReason]] = []
        self._placed: set[int] = set()
        self._index: dict[int, PendingReason] | None = None

    def __setitem__(self, job_id: int, reason: PendingReason) -> None:
        self.own[job_id] = reason
        if self._index is not None:
            self._index[job_id] = reason

    def add_run(self, jobs: Sequence[QueuedJob], start: int, reason: PendingReason) -> None:
        """Give `reason` to `jobs[start:]` (the list must not change afterwards)."""
        if start < len(jobs):
            self._runs.append((jobs, start, reason))
            self._index = None

    def mark_placed(self, job_ids: Iterable[int]) -> None:
        """Leave these jobs out of their runs: they start this round."""
        self._placed.update(job_ids)
        self._index = None

    def runs(self) -> Iterator[tuple[list[int], PendingReason]]:
        """Each run's job ids (without the jobs answered otherwise) and its reason."""
        skip = self._placed | self.own.keys()
        for jobs, start, reason in self._runs:
            ids = [j.job_id for j in jobs[start:] if j.job_id not in skip]
            if ids:
                yield ids, reason

    def _full(self) -> dict[int, PendingReason]:
        if self._index is None:
            index: dict[int, PendingReason] = {}
            for jobs, start, reason in self._runs:
                tail = jobs[start:]
                index.update(zip(map(_JOB_ID, tail), repeat(reason, len(tail)), strict=True))
            for job_id in self._placed:
                index.pop(job_id, None)
            index.update(self.own)
            self._index = index
        return self._index

    def __getitem__(self, job_id: int) -> PendingReason:
        reason = self.own.get(job_id)
        return reason if reason is not None else self._full()[job_id]

    def __contains__(self, job_id: object) -> bool:
        return job_id in self.own or job_id in self._full()

    def __iter__(self) -> Iterator[int]:
        return iter(self._full())

    def __len__(self) -> int:
        return len(self._full())

    def __repr__(self) -> str:
        return f"PendingReasons({len(self.own)} own, {len(self._runs)} runs)"


@dataclass(slots=True)
class Decisions:
    placements: list[Placement] = field(default_factory=list)
    preemptions: list[Preemption] = field(default_factory=list)
    reservations: list[Reservation] = field(default_factory=list)
    pending: PendingReasons = field(default_factory=PendingReasons)
    capacity_advice: dict[str, int] = field(default_factory=dict)  # gpu type -> GPUs short

    def next_holds(self) -> dict[int, dict[str, int]]:
        """This round's reservations in the form the next round's `Snapshot.holds` takes."""
        return {r.job_id: {a.node: len(a.gpus) for a in r.allocations}
                for r in self.reservations}
