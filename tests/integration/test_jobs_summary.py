"""A batch's progress and an experiment's cost, by the labels its jobs carry: how many are in
each state, the GPUs they hold, the GPU-hours they ran and their credits. Attacked: another
organization's jobs with the same label, jobs without it, a try still running, a refunded
failure, and a label that is no label."""

from datetime import timedelta

import pytest
from django.utils import timezone

from credits.models import GpuPrice
from credits.services.grants import credits_grant
from credits.services.holds import job_credits
from jobs.models import Attempt, Job
from jobs.services.submission import JobSpec, job_submit
from tests.support.factories import make_node, run_placed_job, start_placed

pytestmark = pytest.mark.django_db(transaction=True)


def _submit(org, batch: str, gpus: int = 1) -> Job:
    return job_submit(organization=org, spec=JobSpec(
        prompt="a clip", gpus=gpus, time_limit_s=600, labels={"batch": batch}))


def test_a_batch_sums_its_own_jobs_states_gpus_hours_and_credits(api, alice, bob):
    GpuPrice.objects.create(gpu_type="H100", credits_per_gpu_hour=3600)  # 1 credit a second
    for org in (alice, bob):
        credits_grant(organization=org, amount=100_000)
    make_node(gpus=4)
    done = _submit(alice, "b1", gpus=2)
    run_placed_job(done, ran_for_s=360)  # 2 GPUs × 6 min: 0.2 GPU-hours, 720 credits
    failed = _submit(alice, "b1")
    run_placed_job(failed, ran_for_s=60, outcome="FAILED", checkpointed=True)  # refunded
    running = _submit(alice, "b1")
    attempt = start_placed(running)
    Attempt.objects.filter(pk=attempt.pk).update(
        started_at=timezone.now() - timedelta(seconds=180))  # 0.05 GPU-hours so far
    waiting = _submit(alice, "b1", gpus=8)  # no node holds it
    _submit(alice, "b2")  # another batch
    _submit(bob, "b1")  # another organization's
    summary = api.get("/api/v1/jobs/summary?label=batch:b1").json()
    assert summary["jobs"] == 4 and summary["ended"] == 2
    assert summary["states"] == {"FAILED": 1, "QUEUED": 1, "RUNNING": 1, "SUCCEEDED": 1}
    assert summary["gpus_held"] == 1
    assert summary["gpu_hours"] == pytest.approx(0.2 + 60 / 3600 + 0.05, abs=0.002)
    one_by_one = [job_credits(Job.objects.get(pk=j.pk)) for j in (done, failed, running,
                                                                   waiting)]
    assert summary["credits"] == {key: sum(c[key] for c in one_by_one)
                                  for key in ("held", "spent", "refunded")}
    assert summary["credits"]["spent"] >= 720 and summary["credits"]["refunded"] > 0
    assert summary["first_submitted_at"] and summary["last_ended_at"]


def test_the_whole_organization_a_project_and_a_bad_label(api, alice):
    _submit(alice, "b1")
    _submit(alice, "b2")
    assert api.get("/api/v1/jobs/summary").json()["jobs"] == 2
    assert api.get("/api/v1/jobs/summary?label=batch").json()["jobs"] == 2
    none = api.get("/api/v1/jobs/summary?project=elsewhere").json()
    assert (none["jobs"], none["states"], none["gpu_hours"]) == (0, {}, 0)
    assert none["first_submitted_at"] is None
    bad = api.get("/api/v1/jobs/summary?label=no%20such")
    assert bad.status_code == 400 and bad.json()["error"]["code"] == "invalid_labels"


def test_the_jobs_page_sums_up_a_label_whatever_state_it_shows(owner, alice):
    for _ in range(3):
        _submit(alice, "b1")
    Job.objects.filter(pk=_submit(alice, "b1").pk).update(state="CANCELLED")
    page = owner.get("/dashboard/?label=batch:b1&state=CANCELLED").content.decode()
    assert "With this label: 4 jobs\n(1 cancelled, 3 queued)" in page
    assert "With this label" not in owner.get("/dashboard/").content.decode()
