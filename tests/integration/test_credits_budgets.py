"""Budgets: a project, a member or the whole organization cannot commit more credits in a
month than its budget, racing submissions included; voided and refunded credits count no more.
"""

from datetime import timedelta

import pytest
from django.contrib.auth import get_user_model
from django.utils import timezone

from credits.models import Budget, GpuPrice
from credits.services.budgets import budget_report
from credits.services.grants import credits_grant
from jobs.models import Job, Membership, Project
from jobs.services.cancellation import job_cancel
from jobs.services.errors import ServiceError
from jobs.services.submission import JobSpec, job_submit
from tests.support.threads import race

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def funded(alice):
    GpuPrice.objects.create(gpu_type="H100", credits_per_gpu_hour=3600)
    credits_grant(organization=alice, amount=1_000_000)
    Project.objects.create(organization=alice, name="research")
    return alice


def _submit(org, project="", user=None, limit=100):
    return job_submit(organization=org, user=user,
                      spec=JobSpec(prompt="x", time_limit_s=limit, project=project))


def _refusal(org, **kw) -> dict:
    with pytest.raises(ServiceError) as refused:
        _submit(org, **kw)
    assert refused.value.status == 402
    return {"code": refused.value.code, **refused.value.details}


def test_a_project_budget_caps_its_jobs_and_not_the_others(funded):
    Budget.objects.create(organization=funded, project=Project.objects.get(name="research"),
                          monthly_limit=250)
    _submit(funded, "research")
    _submit(funded, "research")
    assert _refusal(funded, project="research") == {
        "code": "budget_exceeded", "scope": "project alice/research", "monthly_limit": 250,
        "committed": 200, "needed": 100}
    _submit(funded)  # the default project has no budget
    assert Job.objects.count() == 3


def test_voided_holds_give_the_budget_back(funded):
    Budget.objects.create(organization=funded, monthly_limit=100)
    job = _submit(funded)
    assert _refusal(funded)["code"] == "budget_exceeded"
    job_cancel(job=job)
    _submit(funded)


def test_a_member_budget_follows_the_member_across_projects(funded):
    ann = get_user_model().objects.create_user("ann")
    Membership.objects.create(user=ann, organization=funded)
    Budget.objects.create(organization=funded, user=ann, monthly_limit=150)
    _submit(funded, "research", user=ann)
    assert _refusal(funded, user=ann)["scope"] == "member ann"
    _submit(funded)  # other submitters are not ann
    assert budget_report(funded.pk)[0]["committed"] == 100


def test_racing_submissions_never_pass_a_budget(funded):
    Budget.objects.create(organization=funded, monthly_limit=450)
    codes = []

    def submit():
        try:
            _submit(funded)
            codes.append("queued")
        except ServiceError as exc:
            codes.append(exc.code)

    race(submit, 8)
    assert sorted(codes) == ["budget_exceeded"] * 4 + ["queued"] * 4
    assert budget_report(funded.pk)[0]["committed"] == 400


def test_last_months_jobs_do_not_count(funded):
    Budget.objects.create(organization=funded, monthly_limit=100)
    old = _submit(funded)
    Job.objects.filter(pk=old.pk).update(created_at="2001-01-15T00:00:00Z")
    _submit(funded)


def test_the_client_sees_its_budgets(funded, api):
    Budget.objects.create(organization=funded, project=Project.objects.get(name="research"),
                          monthly_limit=1_000)
    _submit(funded, "research")
    budgets = api.get("/api/v1/credits").json()["budgets"]
    assert [(b["scope"], b["monthly_limit"], b["committed"]) for b in budgets] == [
        ("project alice/research", 1_000, 100)]


def test_a_refunded_job_gives_the_budget_back(funded):
    from jobs.models import Attempt
    from jobs.scheduler.tick import scheduler_tick_run
    from tests.support.factories import make_node
    from workers.services.attempts import (
        AttemptResult,
        attempt_finish,
        attempt_heartbeat,
        attempt_start,
    )

    Budget.objects.create(organization=funded, monthly_limit=100)
    make_node("n1", gpus=1)
    _submit(funded)
    scheduler_tick_run()
    attempt = Attempt.objects.get()
    attempt_start(attempt_id=attempt.pk, token=attempt.token)
    Attempt.objects.filter(pk=attempt.pk).update(started_at=timezone.now() - timedelta(seconds=30))
    attempt_heartbeat(attempt_id=attempt.pk, token=attempt.token, checkpointed=True)  # posts 30
    attempt_finish(attempt_id=attempt.pk, token=attempt.token, result=AttemptResult("OOM", 1))
    assert budget_report(funded.pk)[0]["committed"] == 0
    _submit(funded)
