"""Engine correctness on scenarios small enough to compute by hand."""

import pytest

from jobs.policy.fifo import decide as fifo_decide
from jobs.policy.types import Allocation, Decisions, PendingReason, Placement, Preemption
from jobs.sim import Simulator
from jobs.sim.metrics import summarize
from jobs.sim.model import NodeSpec, SimJob


def job(i, submit, gpus, dur, tier="free", org="o1"):
    return SimJob(i, org, tier, gpus, submit, dur, time_limit=10 * dur)


def test_fifo_waits_and_jct_exact():
    fleet = [NodeSpec("n0", 2)]
    jobs = [job(1, 0, 2, 100), job(2, 10, 1, 50), job(3, 20, 1, 30)]
    res = Simulator(fleet, jobs, fifo_decide).run()
    by = {j.job_id: j for j in res.jobs}
    assert [by[i].first_start - by[i].submit for i in (1, 2, 3)] == [0, 90, 80]
    assert [by[i].end - by[i].submit for i in (1, 2, 3)] == [100, 140, 110]
    fig = summarize(res)
    assert fig["wait_mean"] == (0 + 90 + 80) / 3
    # p95 per gang size: the 2-GPU job never waited, the 1-GPU ones 80 and 90 s
    assert fig["per_tier"]["free"]["wait_p95_by_gpus"] == {1: 80 + 0.95 * 10, 2: 0.0}
    assert fig["delivered_gpu_hours"] * 3600 == 2 * 100 + 50 + 30
    # jobs wait during [10, 100): both GPUs busy with job 1 the whole time
    assert fig["utilization"] == 1.0
    assert fig["preemptions"] == 0 and fig["missing_pending_reasons"] == 0


def preempting_policy(snap):
    """Enterprise job preempts whatever runs (grace 5 s); otherwise first-fit."""
    out = Decisions()
    free = {n.name: list(n.free_gpus) for n in snap.nodes}
    for q in sorted(snap.queued, key=lambda q: q.tier != "enterprise"):
        node = next((n for n, g in free.items() if len(g) >= q.gpus), None)
        if node is not None:
            alloc = Allocation(node, tuple(free[node][: q.gpus]))
            out.placements.append(Placement(q.job_id, (alloc,)))
            free[node] = free[node][q.gpus:]
        elif q.tier == "enterprise" and snap.running and not any(
                r.expected_end < snap.running[0].time_limit_end for r in snap.running[1:]):
            victim = snap.running[0]
            if victim.tier != "enterprise" and victim.expected_end > snap.now + 5:
                out.preemptions.append(Preemption(victim.attempt_id, victim.job_id, q.job_id, 5))
                out.placements.append(Placement(q.job_id, victim.allocations, preempted=True))
        else:
            out.pending[q.job_id] = PendingReason("resources", "busy")
    return out


def test_preemption_resumes_from_checkpoint_with_restore_cost():
    fleet = [NodeSpec("n0", 1)]
    low, high = job(1, 0, 1, 100), job(2, 45, 1, 10, tier="enterprise", org="o2")
    sim = Simulator(fleet, [low, high], preempting_policy, checkpoint_interval=20,
                    restore_cost=7)
    res = sim.run()
    by = {j.job_id: j for j in res.jobs}
    # preempted at 45 with 5 s grace: stops at 50 with 40 s checkpointed, 10 s lost
    assert by[2].first_start == 50 and by[2].end == 60
    # resumes at 60: 7 s restore + 60 s remaining work
    assert by[1].end == 127 and by[1].preemptions == 1 and by[1].queued_total == 10
    fig = summarize(res)
    assert fig["preemptions"] == 1
    assert round(fig["preempted_gpu_hours"] * 3600, 6) == 10 + 7
    assert round(fig["delivered_gpu_hours"] * 3600, 6) == 127


def test_node_failure_requeues_from_last_checkpoint():
    fleet = [NodeSpec("n0", 1), NodeSpec("n1", 1)]
    jobs = [job(1, 0, 1, 100)]
    sim = Simulator(fleet, jobs, fifo_decide, checkpoint_interval=25, restore_cost=5,
                    repair_s=20)
    sim.events.push(30, "fail", "n0")  # job 1 starts on n0
    sim.events.push(30, "fail", "n1")
    res = sim.run()
    j = res.jobs[0]
    assert j.failures == 1 and j.attempts == 2 and j.retries == 1
    # fails at 30 (25 s saved, 5 s lost), queues after its 5 s backoff, nodes back at 50,
    # 5 s restore + 75 s left
    assert j.end == 130 and j.queued_total == 15
    fig = summarize(res)
    assert round(fig["failure_lost_gpu_hours"] * 3600, 6) == 5 + 5
    assert fig["node_failures"] == 2 and fig["preemptions"] == 0


def test_without_checkpoints_a_preempted_job_restarts_from_zero():
    fleet = [NodeSpec("n0", 1)]
    low, high = job(1, 0, 1, 100), job(2, 45, 1, 10, tier="enterprise", org="o2")
    res = Simulator(fleet, [low, high], preempting_policy, restore_cost=7).run()
    by = {j.job_id: j for j in res.jobs}
    assert by[1].end == 60 + 100  # no restore cost: nothing was saved
    fig = summarize(res)
    assert round(fig["preempted_gpu_hours"] * 3600, 6) == 50
    # the loss is charged to the pair that caused it: an enterprise 1-GPU job, a free one
    (row,) = fig["preemption_loss"]
    assert (row["preemptor"], row["preemptor_gpus"], row["victim"], row["victim_gpus"],
            row["victims"]) == ("enterprise", 1, "free", 1, 1)
    assert round(row["gpu_hours"] * 3600, 6) == 50
    assert list(fig["preempted_gpu_hours_by_tier"]) == ["enterprise>free"]


def test_water_fill_is_weighted_max_min():
    from jobs.sim.fairness import water_fill

    fair = water_fill(10, {"a": 2, "b": 10, "c": 10}, {"c": 3.0})
    assert fair == {"a": 2.0, "b": 2.0, "c": 6.0}
    assert water_fill(0, {"a": 1}, {}) == {"a": 0.0}


def test_gpus_nominated_for_a_preemptor_show_as_its_attempt():
    fleet = [NodeSpec("n0", 1)]
    jobs = [job(1, 0, 1, 100), job(2, 45, 1, 10, tier="enterprise", org="o2"),
            job(3, 46, 1, 10, org="o3")]
    seen = {}

    def recording(snap):
        seen[snap.now] = snap
        return preempting_policy(snap)

    res = Simulator(fleet, jobs, recording, checkpoint_interval=20, restore_cost=7).run()
    snap = seen[46.0]
    assert [(r.attempt_id, r.job_id, r.started_at) for r in snap.running] == [(-2, 2, 45.0)]
    assert snap.running[0].time_limit_end == 50 + 100  # starts when the victim stops
    assert not snap.running[0].preemptible  # as in the service: nothing to stop yet
    assert summarize(res)["invalid_placements"] == 0


def test_node_failure_stops_a_whole_gang_and_frees_its_other_nodes():
    from jobs.policy.baselines import multifactor_decide

    fleet = [NodeSpec("n0", 4, island="i0"), NodeSpec("n1", 4, island="i0")]
    jobs = [job(1, 0, 8, 100), job(2, 40, 4, 10, org="o2")]
    sim = Simulator(fleet, jobs, multifactor_decide, checkpoint_interval=25, restore_cost=5,
                    repair_s=20)
    sim.events.push(30, "fail", "n0")
    res = sim.run()
    by = {j.job_id: j for j in res.jobs}
    assert by[1].failures == 1
    # n1 is freed at 30, so job 2 (arrives at 40) runs there 40..50; n0 is back at 50
    assert by[2].first_start == 40 and by[2].end == 50
    assert by[1].end == 50 + 5 + 75
    assert round(summarize(res)["failure_lost_gpu_hours"] * 3600, 6) == 8 * 5 + 8 * 5


def test_a_gang_spanning_nodes_preempts_and_starts_on_the_freed_island():
    from jobs.policy import decide

    fleet = [NodeSpec("n0", 4, island="i0"), NodeSpec("n1", 4, island="i0")]
    jobs = [job(1, 0, 4, 1000), job(2, 0, 4, 1000, org="o2"),
            job(3, 100, 8, 50, tier="enterprise", org="o3")]
    res = Simulator(fleet, jobs, decide).run()
    by = {j.job_id: j for j in res.jobs}
    # both free gangs go at once (no checkpoints, no grace); without island plans the
    # enterprise gang would wait for them to end at 1000
    assert by[3].first_start == 100 and by[3].end == 150
    assert by[1].preemptions == 1 and by[2].preemptions == 1
    fig = summarize(res)
    assert fig["invalid_placements"] == 0
    assert round(fig["preempted_gpu_hours"] * 3600, 6) == 2 * 4 * 100


@pytest.mark.parametrize("level", ["project", "user"])
def test_projects_and_users_rank_by_decayed_usage_as_in_the_service(level):
    """Tenant a (a project of o1, or a user of its project p) used the GPU for 1,000 s, b
    never ran. When both queue a job while neither runs, b goes first, as in the service,
    whose usage accounts remember a's use (ranking by running GPUs alone would take a's
    job, submitted first)."""
    from jobs.policy import decide

    def part(i, submit, tenant, duration=100, limit=1000):
        where = {"project": tenant} if level == "project" else {"project": "p", "user": tenant}
        return SimJob(i, "o1", "paid", 1, submit, duration, time_limit=limit, **where)

    seen = []

    def policy(snap):
        seen.append(snap)
        return decide(snap)

    jobs = [part(1, 0, "a", 1000, 2000),
            SimJob(2, "o2", "paid", 1, 900, 1000, time_limit=2000, project="x"),
            part(3, 1500, "a"), part(4, 1501, "b")]
    res = Simulator([NodeSpec("n0", 1)], jobs, policy).run()
    by = {j.job_id: j for j in res.jobs}
    assert by[4].first_start == 2000 and by[3].first_start == 2100
    snap = next(s for s in seen if s.now == 2000)
    usage = snap.project_usage if level == "project" else snap.user_usage
    key = ("o1", "a") if level == "project" else ("o1", "p", "a")
    used = usage[key]
    assert 800 < used < 1000  # 1,000 GPU-s, decayed over 1,000 to 2,000 s (half-life 6 h)
    assert usage.get(key[:-1] + ("b",), 0.0) == 0.0
    assert snap.usage["o1"] == used  # the org's usage is the sum of its tenants'


def test_a_job_reports_how_much_later_than_its_first_estimate_it_started():
    from jobs.policy import decide
    fleet = [NodeSpec("n0", 2)]
    # the running job's estimate says it ends at 50 s; it runs until 100 s
    first = SimJob(1, "o1", "paid", 2, 0.0, 100.0, time_limit=600.0, expected_duration=50.0)
    second = SimJob(2, "o2", "paid", 2, 10.0, 10.0, time_limit=600.0, expected_duration=10.0)
    res = Simulator(fleet, [first, second], decide).run()
    by = {j.job_id: j for j in res.jobs}
    assert by[1].first_estimate is None  # started at once, never reserved
    assert by[2].first_estimate == 50.0 and by[2].first_start == 100.0
    paid = summarize(res)["per_tier"]["paid"]
    assert paid["estimated_jobs"] == 1
    assert paid["start_after_estimate_p50"] == paid["start_after_estimate_p95"] == 50.0


def test_the_line_shows_the_work_ahead_and_the_report_compares_it_to_the_wait():
    from jobs.policy import decide

    fleet = [NodeSpec("n0", 1)]
    jobs = [SimJob(i, "o1", "free", 1, 0, 100, time_limit=1000, expected_duration=100)
            for i in (1, 2, 3)]
    res = Simulator(fleet, jobs, decide, line_every=10).run()
    by = {j.job_id: j for j in res.jobs}
    # at t=0 job 1 starts; the line shows job 2 nothing ahead and job 3 job 2's 100 s
    assert by[1].first_line is None
    assert by[2].first_line == (0, 0.0) and by[3].first_line == (0, 100.0)
    # each starts 100 s later than that: the work running now is not in the line
    row = summarize(res)["per_tier"]["free"]
    assert row["line_jobs"] == 2
    assert row["start_after_work_ahead_p50"] == row["start_after_work_ahead_p95"] == 100.0
    off = summarize(Simulator(fleet, [SimJob(1, "o1", "free", 1, 0, 100, time_limit=1000)],
                              decide).run())["per_tier"]["free"]
    assert off["line_jobs"] == 0 and off["start_after_work_ahead_p50"] is None


def test_jobs_without_an_estimate_are_planned_by_their_projects_learned_run_time():
    """`--estimates learned`: after three whole runs at 2 GPUs, one after another, the next
    such job of the project shows their run time; a job of another GPU count shows none."""
    from jobs.sim.runtimes import LearnedRunTimes

    fleet = [NodeSpec("n0", 2)]
    jobs = [SimJob(i, "o1", "free", g, 0, 100, time_limit=1000, project="o1/p")
            for i, g in ((1, 2), (2, 2), (3, 2), (4, 2), (5, 1))]
    for job in jobs:
        job.extra["unestimated"] = True
    seen: dict[int, float | None] = {}

    def decide(snap):
        for q in snap.queued:
            seen[q.job_id] = q.expected_duration_s
        return fifo_decide(snap)

    learner = LearnedRunTimes()
    res = Simulator(fleet, jobs, decide, learner=learner).run()
    assert seen[4] == pytest.approx(100.0) and seen[5] is None
    assert learner.stats["o1/p", 2].runs == 4
    assert {j.job_id: j.expected_duration for j in res.jobs}[5] is None


class Crashes:
    """The crash draw of a test: the try number n crashes `after[n]` seconds after it starts."""

    def __init__(self, *after: float):
        self.after = list(after)

    def expovariate(self, rate: float) -> float:
        return self.after.pop(0) if self.after else 1e9


def test_a_crash_retries_after_its_backoff_on_another_node():
    from jobs.policy import decide

    placed = []

    def placing(snap):
        out = decide(snap)
        placed.extend(a.node for p in out.placements for a in p.allocations)
        return out

    fleet = [NodeSpec("n0", 1), NodeSpec("n1", 1)]
    sim = Simulator(fleet, [job(1, 0, 1, 100)], placing, checkpoint_interval=25,
                    restore_cost=5, crash_rate=1.0)
    sim.crash_rng = Crashes(30)
    res = sim.run()
    j = res.jobs[0]
    assert placed == ["n0", "n1"]
    # crashes at 30 on n0 (25 s saved, 5 s lost), queues at 35 (backoff), starts on n1:
    # 5 s restore + 75 s left
    assert (j.failures, j.retries, j.avoid, j.end) == (1, 1, "n0", 115)
    fig = summarize(res)
    assert (fig["crashes"], fig["retries"], fig["dead_jobs"], fig["finished"]) == (1, 1, 0, 1)
    assert round(fig["failure_lost_gpu_hours"] * 3600, 6) == 5 + 5


def test_a_job_whose_retries_are_spent_is_dead_and_the_run_ends():
    sim = Simulator([NodeSpec("n0", 1)], [job(1, 0, 1, 100), job(2, 500, 1, 10)],
                    fifo_decide, crash_rate=1.0, max_retries=2, retry_backoff_s=5)
    sim.crash_rng = Crashes(10, 10, 10)
    res = sim.run()
    dead, later = res.jobs
    # tries at 0, 15 (backoff 5) and 35 (backoff 10) crash 10 s in; the third is past 2 retries
    assert dead.dead and dead.end is None and (dead.failures, dead.retries) == (3, 2)
    assert later.end == 510  # the run goes on past it
    fig = summarize(res)
    assert (fig["crashes"], fig["retries"], fig["dead_jobs"], fig["finished"]) == (3, 2, 1, 1)
    assert not fig["stalled"]
