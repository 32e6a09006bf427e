"""A month's usage: credits spent and refunded by when they moved, GPU-hours by when they ran,
in all, by project and by GPU type, and only the organization's own."""

from datetime import UTC, date, datetime, timedelta

import pytest

from credits.models import GpuPrice, Transfer
from credits.services.grants import credits_grant
from credits.services.usage import month_bounds, monthly_usage
from jobs.models import Attempt, Project
from jobs.scheduler.tick import scheduler_tick_run
from jobs.services.submission import JobSpec, job_submit
from tests.support.factories import make_node, run_placed_job
from workers.services.attempts import attempt_start

pytestmark = pytest.mark.django_db


def _run(org, project: str, gpus: int, outcome: str) -> Attempt:
    """5 minutes on `gpus` GPUs, checkpointed: a failed job pays for what its checkpoint
    kept, then is refunded in full."""
    Project.objects.get_or_create(organization=org, name=project)
    job = job_submit(organization=org, spec=JobSpec(prompt="x", gpus=gpus, project=project,
                                                    time_limit_s=600))
    return run_placed_job(job, ran_for_s=300, outcome=outcome, checkpointed=True)


def test_spent_refunded_and_gpu_hours_by_project_and_type(alice, bob, api):
    GpuPrice.objects.create(gpu_type="H100", credits_per_gpu_hour=3600)
    credits_grant(organization=alice, amount=100_000)
    credits_grant(organization=bob, amount=100_000)
    make_node("n1", gpus=4)
    _run(alice, "render", 2, "SUCCEEDED")
    _run(alice, "train", 1, "FAILED")
    _run(bob, "render", 4, "SUCCEEDED")
    posts = Transfer.objects.filter(kind="POST", job__organization=alice)
    spent = {t.job.project.name: t.amount for t in posts}
    assert spent["render"] > 0 and spent["train"] > 0
    body = api.get("/api/v1/credits/usage").json()
    assert body["month"] == datetime.now(UTC).strftime("%Y-%m")
    assert (body["spent"], body["refunded"]) == (spent["render"] + spent["train"],
                                                 spent["train"])
    by_project = {p["project"]: p for p in body["projects"]}
    assert by_project["render"]["spent"] == spent["render"]
    assert (by_project["train"]["spent"], by_project["train"]["refunded"]) == (
        spent["train"], spent["train"])
    # 5 minutes on 2 GPUs and on 1 GPU (to the second the metering saw)
    assert by_project["render"]["gpu_hours"] == pytest.approx(10 / 60, abs=0.01)
    assert by_project["train"]["gpu_hours"] == pytest.approx(5 / 60, abs=0.01)
    assert body["gpu_types"] == [{"gpu_type": "H100", "spent": body["spent"],
                                  "gpu_hours": body["gpu_hours"]}]
    assert body["gpu_hours"] == pytest.approx(15 / 60, abs=0.01)  # bob's 4 GPUs not counted


def test_gpu_hours_are_split_at_the_months_edge(alice):
    make_node("n1", gpus=2)
    attempt = _run(alice, "render", 2, "SUCCEEDED")
    start, _ = month_bounds(date(2026, 3, 1))
    Attempt.objects.filter(pk=attempt.pk).update(started_at=start - timedelta(hours=1),
                                                 ended_at=start + timedelta(hours=3))
    march = monthly_usage(alice, date(2026, 3, 1))
    february = monthly_usage(alice, date(2026, 2, 1))
    assert (february["gpu_hours"], march["gpu_hours"]) == (2.0, 6.0)
    assert february["spent"] == march["spent"] == 0  # its credits moved this month
    assert monthly_usage(alice, date(2026, 4, 1))["gpu_hours"] == 0


def test_a_running_attempt_counts_until_now(alice):
    make_node("n1", gpus=1)
    job = job_submit(organization=alice, spec=JobSpec(prompt="x", time_limit_s=600))
    scheduler_tick_run()
    attempt = Attempt.objects.get(job=job)
    attempt_start(attempt_id=attempt.pk, token=attempt.token)
    Attempt.objects.filter(pk=attempt.pk).update(
        started_at=datetime.now(UTC) - timedelta(minutes=30))
    today = datetime.now(UTC).date()
    if today.day == 1 and datetime.now(UTC).hour == 0:
        pytest.skip("the half hour would cross the month's edge")
    assert monthly_usage(alice, today)["gpu_hours"] == pytest.approx(0.5, abs=0.01)


@pytest.mark.parametrize("month", ["2026-13", "2026-1", "x", "1999-12", "9999-12"])
def test_a_bad_month_is_refused_with_a_code(api, month):
    refused = api.get(f"/api/v1/credits/usage?month={month}")
    assert refused.status_code == 400
    assert refused.json()["error"]["fields"]["month"]


def test_month_bounds_roll_over_the_year():
    assert month_bounds(date(2026, 12, 5)) == (datetime(2026, 12, 1, tzinfo=UTC),
                                               datetime(2027, 1, 1, tzinfo=UTC))


def test_a_months_usage_of_the_jobs_with_a_label(alice, api):
    GpuPrice.objects.create(gpu_type="H100", credits_per_gpu_hour=3600)
    credits_grant(organization=alice, amount=100_000)
    make_node("n1", gpus=4)
    for experiment, gpus in (("e1", 2), ("e2", 1)):
        job = job_submit(organization=alice, spec=JobSpec(
            prompt="x", gpus=gpus, time_limit_s=600, labels={"exp": experiment}))
        run_placed_job(job, ran_for_s=300)
    e1 = api.get("/api/v1/credits/usage?label=exp:e1").json()
    everything = api.get("/api/v1/credits/usage").json()
    e1_spent = Transfer.objects.filter(kind="POST", job__labels__exp="e1")
    assert e1["spent"] == sum(t.amount for t in e1_spent) < everything["spent"]
    assert e1["gpu_hours"] == pytest.approx(10 / 60, abs=0.01)
    assert everything["gpu_hours"] == pytest.approx(15 / 60, abs=0.01)
    bad = api.get("/api/v1/credits/usage?label=no%20such")
    assert bad.status_code == 400 and bad.json()["error"]["code"] == "invalid_labels"
