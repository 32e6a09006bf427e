"""GET /metrics: the queue, the fleet, the last round and refusals, in Prometheus' format."""

import re

import pytest

from jobs.models import Tier
from jobs.policy_build import running_compiled
from jobs.scheduler.tick import scheduler_tick_run
from tests.support.broker import purge_broker_and_cache
from tests.support.factories import make_job, make_node

pytestmark = pytest.mark.django_db

_SAMPLE = re.compile(r'^([a-z_]+)(\{(?:[a-z_]+="(?:[^"\\]|\\.)*",?)*\})? (\S+)$')


def _scrape(client) -> dict[tuple[str, str], float]:
    response = client.get("/metrics")
    assert response.status_code == 200
    assert response["Content-Type"].startswith("text/plain; version=0.0.4")
    samples, typed = {}, set()
    for line in response.content.decode().splitlines():
        if line.startswith("# TYPE "):
            typed.add(line.split()[2])
            continue
        if line.startswith("#"):
            continue
        match = _SAMPLE.match(line)
        assert match, f"not a sample line: {line!r}"
        assert match[1] in typed, f"{match[1]} has no TYPE line before it"
        samples[match[1], match[2] or ""] = float(match[3])
    return samples


def test_metrics_show_the_queue_the_fleet_the_last_round_and_refusals(alice, api, client):
    purge_broker_and_cache()
    make_node("n1", gpus=4)
    make_job(alice, gpus=1)
    make_job(alice, gpus=2)
    make_job(alice, gpus=4)  # waits: 3 of the node's 4 GPUs are taken
    scheduler_tick_run()
    Tier.objects.filter(name="paid").update(max_queued_jobs_per_org=1)
    assert api.post("/api/v1/jobs", {"prompt": "x"}, format="json").status_code == 429

    m = _scrape(client)
    assert m["gpusched_jobs", '{state="SCHEDULED"}'] == 2
    assert m["gpusched_jobs", '{state="QUEUED"}'] == 1
    assert m["gpusched_queued_gpus", '{tier="paid"}'] == 4
    assert m["gpusched_running_gpus", '{tier="paid"}'] == 3
    assert m["gpusched_gpus", '{gpu_type="H100",health="HEALTHY",node_state="ACTIVE"}'] == 4
    assert m["gpusched_gangs_across_nodes", ""] == 0
    assert m["gpusched_nodes_cordoned_for_failures", ""] == 0
    assert m["gpusched_tick_last_run_timestamp_seconds", ""] > 0
    assert m["gpusched_tick_policy_compiled", ""] == (1 if running_compiled() else 0)
    assert all(m["gpusched_tick_phase_seconds", f'{{phase="{p}"}}'] > 0
               for p in ("snapshot", "decision", "commit"))
    assert m["gpusched_tick_queue_rows_read", ""] == 3  # the three jobs queued then
    assert m["gpusched_backlog_seconds", '{tier="free"}'] > 0
    assert m["gpusched_queue_line_timestamp_seconds", ""] == pytest.approx(
        m["gpusched_tick_last_run_timestamp_seconds", ""])
    assert m["gpusched_queue_line_seconds", ""] > 0
    assert m["gpusched_requests_refused_total", '{code="queue_full"}'] == 1
    assert m["gpusched_requests_refused_total", '{code="overloaded"}'] == 0


def test_metrics_count_the_gangs_that_span_nodes(alice, client):
    purge_broker_and_cache()
    for name in ("n1", "n2"):
        make_node(name, gpus=2, island="r1")
    make_job(alice, gpus=4)
    make_job(alice, gpus=4)  # waits
    scheduler_tick_run()
    assert _scrape(client)["gpusched_gangs_across_nodes", ""] == 1


def test_metrics_show_the_ledgers_totals(alice, bob, client):
    from credits.errors import InsufficientCredits
    from credits.models import GpuPrice
    from credits.services.grants import credits_grant
    from jobs.services.cancellation import job_cancel
    from jobs.services.submission import JobSpec, job_submit

    purge_broker_and_cache()
    assert not any(name.startswith("gpusched_credits") for name, _ in _scrape(client))
    GpuPrice.objects.create(gpu_type="H100", credits_per_gpu_hour=3600)
    credits_grant(organization=alice, amount=5_000)
    credits_grant(organization=bob, amount=1_000)
    job_submit(organization=alice, spec=JobSpec(prompt="x", time_limit_s=600))
    job_cancel(job=job_submit(organization=bob, spec=JobSpec(prompt="y", time_limit_s=60)))
    with pytest.raises(InsufficientCredits):  # counted with the refusals
        job_submit(organization=bob, spec=JobSpec(prompt="z", time_limit_s=6_000))
    m = _scrape(client)
    assert (m["gpusched_credits_granted", ""], m["gpusched_credits_held", ""],
            m["gpusched_credits_spent", ""]) == (6_000, 600, 0)
    assert "gpusched_credits_expired" not in {name for name, _ in m}
    assert m["gpusched_requests_refused_total", '{code="insufficient_credits"}'] == 1


def test_metrics_show_the_running_work_no_checkpoint_keeps(alice, client):
    from datetime import timedelta

    from django.utils import timezone

    from jobs.models import Attempt
    from workers.services.attempts import attempt_heartbeat, attempt_start

    make_node("n1", gpus=2)
    job = make_job(alice, gpus=2)
    scheduler_tick_run()
    assert _scrape(client).get(("gpusched_work_at_risk_gpu_seconds", '{tier="paid"}')) is None
    attempt = Attempt.objects.get(job=job)
    attempt_start(attempt_id=attempt.pk, token=attempt.token)
    Attempt.objects.filter(pk=attempt.pk).update(
        started_at=timezone.now() - timedelta(seconds=100))
    assert 200 <= _scrape(client)["gpusched_work_at_risk_gpu_seconds", '{tier="paid"}'] < 210
    attempt_heartbeat(attempt_id=attempt.pk, token=attempt.token, checkpointed=True)
    assert _scrape(client)["gpusched_work_at_risk_gpu_seconds", '{tier="paid"}'] < 10


@pytest.mark.django_db(transaction=True)  # counted once the end commits
def test_metrics_count_failed_tries_by_kind(alice, client):
    from tests.support.factories import start_placed
    from workers.services.attempts import AttemptResult, attempt_finish

    purge_broker_and_cache()
    make_node("n1", gpus=1)
    ends = [AttemptResult("FAILED", 1, "boom", None, "exit_1"),
            AttemptResult("FAILED", -11, "", None, "exit_-11"),
            AttemptResult("FAILED", -15, "", None, "hung"),
            AttemptResult("OOM", 137, "CUDA out of memory", None, "out_of_memory"),
            AttemptResult("FAILED", 2, "usage", None, "exit_2"),
            AttemptResult("FAILED", None, "No such file", None, "launch_failed"),
            AttemptResult("SUCCEEDED", 0)]
    for result in ends:
        attempt = start_placed(make_job(alice))
        attempt_finish(attempt_id=attempt.pk, token=attempt.token, result=result)
    m = _scrape(client)
    assert {k: m["gpusched_attempt_failures_total", f'{{kind="{k}"}}'] for k in (
        "crash", "hung", "corrupt_output", "out_of_memory", "bad_input", "launch_failed")} == {
        "crash": 2, "hung": 1, "corrupt_output": 0, "out_of_memory": 1, "bad_input": 1,
        "launch_failed": 1}
