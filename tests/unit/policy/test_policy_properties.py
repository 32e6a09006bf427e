"""Properties of the gpusched policy on random fleets, running work and queues."""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import asdict
from unittest.mock import patch

from hypothesis import given, settings
from hypothesis import strategies as st
from policy_builders import NOW
from policy_strategies import (
    COMMON,
    big_gangs,
    contention,
    idle_reserved,
    island_contention,
    snapshots,
)

from jobs.policy import POLICIES, decide, walk_end
from jobs.policy.gpusched import _Round
from jobs.policy.types import Decisions, Snapshot


@COMMON
@given(st.one_of(snapshots(), big_gangs(), contention(), island_contention()))
def test_no_policy_changes_the_snapshot_it_decides_on(s: Snapshot) -> None:
    """The records of a snapshot are not frozen (types.py, RECORDS): the simulator hands the
    same ones to round after round, so a policy that changed one would change the next."""
    before = asdict(s)  # a copy by value (a compiled TierSpec, frozen, cannot be deep-copied)
    for decide_with in POLICIES.values():
        decide_with(s)
        assert asdict(s) == before


@COMMON
@given(st.one_of(snapshots(), big_gangs(), contention()))
def test_no_gpu_is_given_twice_or_taken_while_busy(s: Snapshot) -> None:
    check_gpus_given_once(s, decide(s))


def check_gpus_given_once(s: Snapshot, d: Decisions) -> None:
    free = {(n.name, g) for n in s.nodes if n.schedulable for g in n.free_gpus}
    victims = {p.attempt_id for p in d.preemptions}
    freed = {(a.node, g) for r in s.running if r.attempt_id in victims
             for a in r.allocations for g in a.gpus}
    seen: set[tuple[str, int]] = set()
    for p in d.placements:
        for a in p.allocations:
            for g in a.gpus:
                assert (a.node, g) not in seen, "GPU placed twice"
                seen.add((a.node, g))
                allowed = free | freed if p.preempted else free
                assert (a.node, g) in allowed, "placed on a busy GPU"


@COMMON
@given(st.one_of(snapshots(), big_gangs()))
def test_gangs_are_all_or_nothing_on_one_node_or_one_island(s: Snapshot) -> None:
    check_gangs_whole(s, decide(s))


def check_gangs_whole(s: Snapshot, d: Decisions) -> None:
    jobs = {j.job_id: j for j in s.queued}
    by_name = {n.name: n for n in s.nodes}
    for p in d.placements:
        q = jobs[p.job_id]
        assert sum(len(a.gpus) for a in p.allocations) == q.gpus
        names = [a.node for a in p.allocations]
        assert len(set(names)) == len(names)
        nodes = [by_name[n] for n in names]
        if len(nodes) > 1:
            assert q.gpus > max(n.total_gpus for n in nodes)
            assert len({n.island for n in nodes}) == 1
        for n in nodes:
            assert n.schedulable
            assert not q.gpu_types or n.gpu_type in q.gpu_types


@COMMON
@given(st.one_of(snapshots(), contention()))
def test_no_policy_starts_a_job_that_would_outlast_a_nodes_maintenance_window(
        s: Snapshot) -> None:
    """A node with a window takes a job only when its time limit ends by then, or, under
    gpusched, when the job checkpoints, may be stopped and can run `window_run_s` first:
    preempted GPUs and kept reservations included (a job that cannot start reserves
    elsewhere)."""
    jobs = {j.job_id: j for j in s.queued}
    until = {n.name: n.until for n in s.nodes if n.until is not None}
    coming = {n.name: n.upcoming for n in s.nodes if n.upcoming}  # dedicated from its window
    for name, decide_with in POLICIES.items():
        d = decide_with(s)
        for p in d.placements:
            job = jobs[p.job_id]
            need = job.time_limit_s
            tier = s.tiers.get(job.tier)
            stoppable = job.preemptible and tier is not None and tier.preemptible
            if name == "gpusched" and job.checkpointable and stoppable and not p.preempted:
                need = min(need, s.config.window_run_s)
            for a in p.allocations:
                if a.node in until and coming.get(a.node) != job.org:
                    assert s.now + need <= until[a.node], name
        for r in d.reservations:
            assert name != "gpusched" or not {a.node for a in r.allocations} & set(until)
    for job_id, reason in decide(s).pending.items():
        if reason.code == "maintenance":
            assert job_id in jobs and any(s.now + jobs[job_id].time_limit_s > t
                                          for t in until.values())


@COMMON
@given(snapshots())
def test_no_policy_starts_or_reserves_a_job_on_a_node_dedicated_to_another_organization(
        s: Snapshot) -> None:
    """Nor on the GPUs its preemptions free there, nor in a reservation kept from before."""
    org = {j.job_id: j.org for j in s.queued}
    owner = {n.name: n.owner for n in s.nodes if n.owner}
    for name, decide_with in POLICIES.items():
        d = decide_with(s)
        for job_id, allocations in [*((p.job_id, p.allocations) for p in d.placements),
                                    *((r.job_id, r.allocations) for r in d.reservations)]:
            for a in allocations:
                assert owner.get(a.node, org[job_id]) == org[job_id], (name, job_id, a.node)


@COMMON
@given(st.one_of(snapshots(), contention()))
def test_preemption_only_hits_lower_preemptible_attempts_under_their_cap(s: Snapshot) -> None:
    check_victims(s, decide(s))


def check_victims(s: Snapshot, d: Decisions) -> None:
    runs = {r.attempt_id: r for r in s.running}
    jobs = {j.job_id: j for j in s.queued}
    per_org = defaultdict(int)
    preemptors = {p.job_id for p in d.placements if p.preempted}
    for p in d.preemptions:
        victim, preemptor = runs[p.attempt_id], jobs[p.for_job_id]
        vt, pt = s.tiers[victim.tier], s.tiers[preemptor.tier]
        assert vt.priority < pt.priority
        assert vt.preemptible and victim.preemptible
        assert victim.preemptions < vt.max_preemptions
        assert NOW - victim.started_at >= s.config.min_runtime_before_preempt_s
        assert 0 <= p.grace_s <= s.config.preempt_grace_max_s
        # the victims' grace never makes the preemptor miss its start SLO, beyond the few
        # seconds a signalled checkpoint takes
        slack = preemptor.enqueued_at + pt.start_slo_s - NOW
        assert p.grace_s <= max(slack, s.config.signal_grace_s)
        assert p.for_job_id in preemptors
        per_org[preemptor.org] += 1
    assert all(n <= s.config.preemption_budget_per_org for n in per_org.values())
    assert len({p.attempt_id for p in d.preemptions}) == len(d.preemptions)
    check_victim_floors(s, d)


def check_victim_floors(s: Snapshot, d: Decisions) -> None:
    """No tier loses victims below its guaranteed floor (what it runs, with this round's
    starts, less what it loses)."""
    fleet = sum(n.total_gpus for n in s.nodes if n.schedulable)
    runs = {r.attempt_id: r for r in s.running}
    jobs = {j.job_id: j for j in s.queued}
    held: dict[str, int] = defaultdict(int)
    for r in s.running:
        held[r.tier] += r.gpus
    for p in d.placements:
        held[jobs[p.job_id].tier] += jobs[p.job_id].gpus
    lost: dict[str, int] = defaultdict(int)
    for p in d.preemptions:
        lost[runs[p.attempt_id].tier] += runs[p.attempt_id].gpus
    for tier, gpus in lost.items():
        floor = math.floor(s.tiers[tier].guaranteed_share * fleet + 1e-9)
        assert held[tier] - gpus >= floor, f"{tier} pushed below its floor"


@COMMON
@given(island_contention())
def test_island_preemption_plans_keep_every_gpu_gang_and_victim_rule(s: Snapshot) -> None:
    d = decide(s)
    check_gpus_given_once(s, d)
    check_gangs_whole(s, d)
    check_victims(s, d)


@COMMON
@given(snapshots())
def test_every_queued_job_is_placed_or_has_a_reason(s: Snapshot) -> None:
    d = decide(s)
    placed = {p.job_id for p in d.placements}
    assert len(placed) == len(d.placements)
    for j in s.queued:
        assert (j.job_id in placed) != (j.job_id in d.pending)
        if j.job_id in d.pending:
            assert d.pending[j.job_id].code and d.pending[j.job_id].text
    assert set(d.pending) <= {j.job_id for j in s.queued}
    # the service writes runs and single answers apart: together they are the same answers
    run_ids = [i for ids, _ in d.pending.runs() for i in ids]
    assert len(run_ids) == len(set(run_ids))
    assert set(run_ids).isdisjoint(d.pending.own)
    assert set(run_ids) | d.pending.own.keys() == set(d.pending)


@settings(max_examples=60, deadline=None)
@given(snapshots())
def test_every_registered_policy_explains_what_it_leaves(s: Snapshot) -> None:
    for fn in POLICIES.values():
        d = fn(s)
        placed = {p.job_id for p in d.placements}
        assert all(j.job_id in placed or j.job_id in d.pending for j in s.queued)


def _walk_while_reserved_gpus_idle(rnd) -> bool:
    """The stop rule before the walk could stop at idle reserved GPUs no job can get: it went
    on while any was idle (walk_end.exhausted must decide the same)."""
    if rnd.after_block is None:
        return False
    if rnd.after_block >= rnd.cfg.backfill_depth:
        return True
    if rnd.index.total_free > 0 or rnd.timeline.idle_reserved > 0:
        return False
    return rnd.preempt_tries >= rnd.cfg.max_preemptors_per_round or not rnd.victims.by_node


def _decided(d: Decisions) -> tuple[list[str], ...]:
    return tuple(sorted(map(repr, xs)) for xs in (d.placements, d.preemptions, d.reservations))


@COMMON
@given(st.one_of(snapshots(), contention(), idle_reserved()))
def test_stopping_the_walk_early_changes_no_decision(s: Snapshot) -> None:
    early = decide(s)
    with patch.object(walk_end, "exhausted", _walk_while_reserved_gpus_idle):
        full = decide(s)
    assert _decided(early) == _decided(full)


@COMMON
@given(st.one_of(snapshots(), contention(), idle_reserved()))
def test_capacity_advice_sums_the_late_jobs_the_walk_left(s: Snapshot) -> None:
    """The tail's late GPUs, kept while grouping and popping, against a count over the jobs
    the walk left: past their tier's start SLO, not started, not of a capped org, tier, project
    or submitter (ranking.RankedQueue.exclude_user: their jobs count in no advice)."""
    rnd = _Round(s)
    rnd.run()
    queue, started = rnd.queue, {j for j, hold in rnd.kept.items() if hold is None}
    expected: dict[str, int] = defaultdict(int)
    for project, jobs, first in queue.unreached():
        tier, org = project.tier, project.org
        if queue.tier_excluded(tier) or queue.org_excluded(tier, org) or project.excluded:
            continue
        for j in jobs[first:]:
            if project.users and project.users[j.user].excluded:
                continue
            if j.enqueued_at <= s.now - s.tiers[tier].start_slo_s and j.job_id not in started:
                expected[j.gpu_types[0] if j.gpu_types else "any"] += j.gpus
    capped = lambda t, o: queue.tier_excluded(t) or queue.org_excluded(t, o)  # noqa: E731
    got = {t: n for t, n in queue.late.short_by_type(capped).items() if n}
    assert got == {t: n for t, n in expected.items() if n}
