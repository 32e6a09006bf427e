"""Build the policy's Snapshot from the database (reads only)."""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Mapping
from collections.abc import Set as AbstractSet
from datetime import datetime, timedelta
from sys import intern

from django.conf import settings
from django.db.models import Exists, OuterRef

from jobs import policy as P
from jobs.models import (
    Attempt,
    AttemptRank,
    GpuBinding,
    Job,
    Membership,
    Organization,
    Project,
    Tier,
)
from jobs.scheduler.live_cache import LIVE_COLUMNS, live_attempts
from jobs.scheduler.queue_cache import queued_jobs, seconds_or_none, without
from jobs.scheduler.runtimes import Key as RunTimeKey
from jobs.scheduler.runtimes import load_run_times, run_time_of
from jobs.scheduler.usage import LiveUse, load_usage, user_key
from jobs.states import JobState
from workers.models import Gpu, Node, NodeState
from workers.services.dedication import begins_at


def ts(value: datetime | None) -> float | None:
    return value.timestamp() if value else None


def load_tiers() -> dict[str, P.TierSpec]:
    return {
        t.name: P.TierSpec(
            name=t.name, priority=t.priority, weight=t.weight,
            guaranteed_share=t.guaranteed_share, max_share=t.max_share,
            start_slo_s=float(t.start_slo_seconds), preemptible=t.preemptible,
            max_preemptions=t.max_preemptions,
        )
        for t in Tier.objects.all()
    }


Promised = AbstractSet[tuple[str, int]]  # (node name, GPU index) nominated to a preemptor


def schedulable(node: Node, now: datetime) -> bool:
    """Active and heard from recently: the policy may place work on it."""
    fresh_after = now - timedelta(seconds=settings.GPUSCHED_NODE_STALE_SECONDS)
    alive = node.last_heartbeat is not None and node.last_heartbeat >= fresh_after
    return alive and node.state == NodeState.ACTIVE


def island_of(node: Node) -> str:
    """Its rack / NVLink island; a node whose operator named none shares a gang with no
    other node, since nothing says its network carries one."""
    return node.island or f"{NO_ISLAND}{node.name}"


NO_ISLAND = "\0"  # not a name an operator can type


def load_nodes(now: datetime, promised: Promised = frozenset()) -> list[P.NodeView]:
    """Nodes and their free GPUs; GPUs promised to a preemptor are not free to anyone else."""
    # the database leaves out the bound GPUs (the partial index of live bindings): a busy
    # fleet sends back a few rows, not every GPU and every binding
    bound = GpuBinding.objects.filter(gpu=OuterRef("pk"), released_at__isnull=True)
    free: dict[int, list[int]] = defaultdict(list)
    for node_id, index in Gpu.objects.filter(health=Gpu.Health.HEALTHY).exclude(
        Exists(bound)
    ).values_list("node_id", "index"):
        free[node_id].append(index)
    nodes = []
    owners = dict(Organization.objects.filter(dedicated_nodes__isnull=False).values_list(
        "pk", "slug").distinct())  # usually none
    for n in Node.objects.exclude(state=NodeState.DOWN).order_by("name").only(
        "name", "gpu_type", "gpu_memory_mb", "gpu_count", "region", "island", "state",
        "last_heartbeat", "maintenance_at", "maintenance_until", "dedicated_to_id",
        "dedicated_from"
    ):
        indices = tuple(sorted(g for g in free[n.id] if (n.name, g) not in promised))
        nodes.append(P.NodeView(
            name=n.name, gpu_type=n.gpu_type, gpu_memory_mb=n.gpu_memory_mb,
            total_gpus=n.gpu_count, free_gpus=indices, region=n.region,
            island=island_of(n), schedulable=schedulable(n, now),
            back_at=n.maintenance_until.timestamp() if n.maintenance_until else None,
            **_dedication(n, owners.get(n.dedicated_to_id, ""), now.timestamp()),
        ))
    return nodes


def _dedication(node: Node, org: str, now: float) -> dict:
    """The node's owner, or, for a dedication ahead, the window it is to others and its
    coming owner (held to the window all the same where maintenance comes too)."""
    maintenance, begins = window_end(node), begins_at(node)
    if begins is None or begins <= now:
        return {"until": maintenance, "owner": org}
    if maintenance is None:
        return {"until": begins, "upcoming": org}
    return {"until": min(maintenance, begins)}


def window_end(node: Node) -> float | None:
    """When a job started on the node must have reached its time limit: its maintenance, less
    the kill grace a job past its limit is given to stop."""
    if node.maintenance_at is None:
        return None
    return node.maintenance_at.timestamp() - settings.GPUSCHED_KILL_GRACE_S


RunTimes = Mapping[RunTimeKey, float]  # runtimes.load_run_times()


def _expected_end(start: float, limit_end: float, estimate, stop_deadline,
                  learned: float | None) -> float:
    """By its deadline if asked to stop, else by the client's estimate, else by the
    `learned` run time, never past its limit."""
    if stop_deadline is not None:  # asked to stop: gone by its deadline
        return min(stop_deadline.timestamp(), limit_end)
    seconds = seconds_or_none(estimate) or learned
    return min(start + seconds, limit_end) if seconds else limit_end


# the columns fair share's usage reads of them, in the order of usage.LiveUse
_USE = tuple(map(LIVE_COLUMNS.index, ("pk", "organization", "project", "submitted_by_id",
                                      "gpu_indices", "started_at")))


Ranks = Mapping[int, list[P.Allocation]]  # live_ranks()


def live_ranks() -> dict[int, list[P.Allocation]]:
    """attempt -> its further nodes' GPUs, for the live attempts whose gang spans nodes. A
    rank whose process ended keeps its GPUs bound until the attempt ends (place), unless it
    freed them to copy its checkpoint (workers/services/ranks.rank_free_gpus)."""
    out: dict[int, list[P.Allocation]] = defaultdict(list)
    for attempt, node, gpus in AttemptRank.objects.filter(
        attempt__ended_at__isnull=True, gpus_freed_at__isnull=True
    ).values_list("attempt_id", "node__name", "gpu_indices"):
        out[attempt].append(P.Allocation(node, tuple(gpus)))
    return out


def live_use(rows: list[tuple], ranks: Ranks) -> list[LiveUse]:
    """The started attempts among live_attempts() rows (live_cache.py), with their GPUs on
    every node (`ranks`: live_ranks()), as load_usage counts them."""
    pk, org, project, user, gpus, started = _USE
    return [(row[org], row[project], row[user],
             len(row[gpus]) + sum(len(a.gpus) for a in ranks.get(row[pk], ())), row[started])
            for row in rows if row[started] is not None]


def load_running(now: datetime, promised: Promised = frozenset(),
                 rows: list[tuple] | None = None, run_times: RunTimes | None = None,
                 ranks: Ranks | None = None) -> list[P.RunningView]:
    """Live attempts, less the GPUs they are freeing for a preemptor (see load_nominees).
    `rows`, `ranks`: live_attempts(), live_ranks(), where the caller has read them already."""
    rows = live_attempts() if rows is None else rows
    learned = run_times or {}
    ranks = live_ranks() if ranks is None else ranks
    promised_on = {node for node, _ in promised}  # most attempts share no node with these
    out = []
    for (pk, job_id, org, tier, project, node, gpus, started, created, limit, estimate, stop,
         stop_deadline, checkpoint, checkpointable, preemptible, preemptions, user,
         job_gpus, project_id) in rows:
        start = (started or created).timestamp()
        limit_end = start + limit
        further = ranks.get(pk)
        allocations = ((P.Allocation(node, tuple(gpus)),) if further is None
                       else (P.Allocation(node, tuple(gpus)), *further))
        if promised_on and any(a.node in promised_on for a in allocations):
            allocations = _unpromised(allocations, promised)
            if not allocations:
                continue
        out.append(P.RunningView(
            attempt_id=pk, job_id=job_id, org=intern(org), tier=intern(tier),
            project=intern(project),
            allocations=allocations, started_at=start,
            expected_end=_expected_end(start, limit_end, estimate,
                                       stop_deadline if stop else None,
                                       run_time_of(learned, project_id, job_gpus)),
            time_limit_end=limit_end, last_checkpoint_at=ts(checkpoint),
            checkpointable=checkpointable,
            # an attempt already asked to stop is not a victim twice, and one that has not
            # started cannot be asked (apply._request_preemption stops running jobs only)
            preemptible=preemptible and not stop and started is not None,
            preemptions=preemptions, user=intern(user_key(user)),
        ))
    return out


def _unpromised(allocations: tuple[P.Allocation, ...], promised: Promised
                ) -> tuple[P.Allocation, ...]:
    """The allocations less the GPUs promised to a preemptor; nodes left with none dropped."""
    kept = (P.Allocation(a.node, tuple(g for g in a.gpus if (a.node, g) not in promised))
            for a in allocations)
    return tuple(a for a in kept if a.gpus)


def load_nominees(now: datetime, run_times: RunTimes | None = None) -> list[P.RunningView]:
    """Queued preemptors, each shown as running on the GPUs promised to it.

    As in the simulator: not preemptible, starting when its last victim's grace ends, so
    the policy neither places other work on those GPUs nor counts them as freeing up then.
    """
    rows = list(Job.objects.filter(state=JobState.QUEUED, nominated_node__isnull=False)
                .values_list("pk", "organization__slug", "organization__tier__name",
                             "project__name", "nominated_node__name", "nominated_gpus",
                             "nominated_peers",
                             "time_limit_s", "params__expected_duration_s", "checkpointable",
                             "preemptions", "submitted_by_id", "project_id", "gpus"))
    stops: dict[int, float] = defaultdict(lambda: now.timestamp())
    for job_id, deadline in Attempt.objects.filter(
        ended_at__isnull=True, preempted_for_id__in=[r[0] for r in rows],
        stop_deadline__isnull=False,
    ).values_list("preempted_for_id", "stop_deadline"):
        stops[job_id] = max(stops[job_id], deadline.timestamp())
    out = []
    learned = run_times or {}
    for (pk, org, tier, project, node, gpus, peers, limit, estimate, checkpointable,
         preemptions, user, project_id, job_gpus) in rows:
        begin = stops[pk]
        limit_end = begin + limit
        out.append(P.RunningView(
            attempt_id=-pk, job_id=pk, org=org, tier=tier, project=project,
            allocations=(P.Allocation(node, tuple(sorted(gpus))),
                         *(P.Allocation(p["node"], tuple(sorted(p["gpus"]))) for p in peers)),
            started_at=begin,
            expected_end=_expected_end(begin, limit_end, estimate, None,
                                       run_time_of(learned, project_id, job_gpus)),
            time_limit_end=limit_end, checkpointable=checkpointable, preemptible=False,
            preemptions=preemptions, user=user_key(user),
        ))
    return out


def load_queued(nominees: AbstractSet[int] = frozenset(), limit_weight: float = 0.0,
                run_times: RunTimes | None = None) -> list[P.QueuedJob]:
    """Waiting jobs, less the preemptors whose victims are stopping for them: the policy
    must not place or preempt for them again (nominations.py starts them).

    In the order the policy walks a project (virtual deadline, `limit_weight`), so that it
    need not sort the whole queue again; read from this process's cache (queue_cache.py).
    """
    stopping_for = Attempt.objects.filter(ended_at__isnull=True, preempted_for__isnull=False
                                          ).values_list("preempted_for_id", flat=True)
    return without(queued_jobs(limit_weight, run_times), {*stopping_for, *nominees})


def load_org_caps() -> tuple[dict[str, float], dict[str, int]]:
    weights, caps = {}, {}
    for slug, weight, cap, tier_cap, suspended in Organization.objects.values_list(
        "slug", "weight", "running_gpu_cap", "tier__max_running_gpus_per_org", "suspended_at"
    ):
        weights[slug] = weight
        cap = Organization.gpu_cap(cap, tier_cap, suspended)
        if cap is not None:
            caps[slug] = cap
    return weights, caps


def load_project_weights() -> dict[tuple[str, str], float]:
    """(org, project) -> fair-share weight inside its org, for weights other than 1."""
    rows = Project.objects.exclude(weight=1.0).values_list("organization__slug", "name", "weight")
    return {(org, name): weight for org, name, weight in rows}


def load_project_caps() -> dict[tuple[str, str], int]:
    """(org, project) -> running-GPU cap of the projects that have one."""
    rows = Project.objects.filter(running_gpu_cap__isnull=False).values_list(
        "organization__slug", "name", "running_gpu_cap")
    return {(org, name): cap for org, name, cap in rows}


def load_user_caps() -> dict[tuple[str, str], int]:
    """(org, user) -> running-GPU cap of the members that have one."""
    rows = Membership.objects.filter(running_gpu_cap__isnull=False).values_list(
        "organization__slug", "user_id", "running_gpu_cap")
    return {(org, user_key(user)): cap for org, user, cap in rows}


def load_user_weights() -> dict[tuple[str, str], float]:
    """(org, user) -> fair-share weight of the user inside the org's projects, if not 1."""
    rows = Membership.objects.exclude(weight=1.0).values_list("organization__slug", "user_id",
                                                             "weight")
    return {(org, user_key(user)): weight for org, user, weight in rows}


def policy_config() -> P.PolicyConfig:
    return P.PolicyConfig(usage_half_life_s=settings.GPUSCHED_USAGE_HALF_LIFE_S,
                          min_runtime_before_preempt_s=settings.GPUSCHED_PREEMPT_MIN_RUNTIME_S,
                          starve_after_s=settings.GPUSCHED_STARVE_AFTER_S or None,
                          first_kill_loss_ratio=settings.GPUSCHED_FIRST_KILL_LOSS_RATIO or None,
                          limit_weight=settings.GPUSCHED_LIMIT_WEIGHT,
                          # a victim checkpointing on SIGTERM gets what a binary at its time
                          # limit gets
                          signal_grace_s=settings.GPUSCHED_KILL_GRACE_S,
                          # a gang larger than a node spans nodes of one island (apply.place)
                          span_nodes=settings.GPUSCHED_SPAN_NODES,
                          window_run_s=settings.GPUSCHED_WINDOW_RUN_S or math.inf)


def load_snapshot(now: datetime) -> P.Snapshot:
    config = policy_config()
    # one read for fair share's usage and the running attempts
    live, ranks = live_attempts(), live_ranks()
    usage = load_usage(now, config.usage_half_life_s, live_use(live, ranks))
    weights, caps = load_org_caps()
    # for the jobs that come without an estimate
    run_times = load_run_times() if settings.GPUSCHED_LEARNED_RUN_TIMES else {}
    nominees = load_nominees(now, run_times)
    promised = {(a.node, g) for run in nominees for a in run.allocations for g in a.gpus}
    return P.Snapshot(
        now=now.timestamp(), nodes=load_nodes(now, promised),
        running=load_running(now, promised, live, run_times, ranks) + nominees,
        queued=load_queued({run.job_id for run in nominees}, config.limit_weight, run_times),
        tiers=load_tiers(),
        usage=usage.org, project_usage=usage.project, user_usage=usage.user,
        org_weights=weights, org_gpu_caps=caps, project_gpu_caps=load_project_caps(),
        user_gpu_caps=load_user_caps(),
        project_weights=load_project_weights(), user_weights=load_user_weights(),
        config=config, queue_sorted=True,
    )
