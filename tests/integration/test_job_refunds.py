"""An operator refunds an ended job, as support makes good a video that came out wrong: what
it spent goes back to the wallets it came from, tied to the job, and the organization's
audit trail and its webhooks say so. Attacked: a job still running, a refund repeated, a
part then the rest and more, three refunds racing, and a job that paid nothing (invariant
5: every credit moves once, by a double-entry transfer; the webhooks are told once)."""

import json
from datetime import timedelta
from functools import partial

import pytest
from django.contrib.auth import get_user_model
from django.utils import timezone

from credits.models import Account, GpuPrice, Transfer
from credits.services.grants import credits_grant
from credits.services.holds import job_credits
from credits.services.refunds import job_refund
from jobs.api.openapi import openapi_document
from jobs.models import Attempt, Job, OrganizationEvent, WebhookDelivery, WebhookEndpoint
from jobs.services.errors import Conflict, ValidationFailed
from jobs.services.submission import JobSpec, job_submit
from jobs.services.webhooks import webhook_deliver
from tests.support.factories import make_job, make_node, start_placed
from tests.support.ledger import assert_ledger_consistent, wallet_of
from tests.support.openapi import conforms
from tests.support.race import race
from tests.support.receiver import Receiver
from workers.services.attempts import AttemptResult, attempt_finish

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def operator():
    return get_user_model().objects.create_superuser("op", password="pw-op-1")


@pytest.fixture
def priced(alice):
    GpuPrice.objects.create(gpu_type="H100", credits_per_gpu_hour=3600)  # 1 credit a second
    credits_grant(organization=alice, amount=10_000)
    make_node(gpus=1)
    return alice


def _ran(org, outcome: str = "SUCCEEDED") -> Job:
    """A job that ran 100 s to its end (no retry after a failure)."""
    job = job_submit(organization=org, spec=JobSpec(prompt="a fox", max_retries=0))
    attempt = start_placed(job)
    Attempt.objects.filter(pk=attempt.pk).update(
        started_at=timezone.now() - timedelta(seconds=100))
    return attempt_finish(attempt_id=attempt.pk, token=attempt.token,
                          result=AttemptResult(outcome, 0 if outcome == "SUCCEEDED" else 1))


def test_an_ended_job_is_refunded_once_and_the_audit_trail_says_so(priced, operator,
                                                                   settings):
    settings.GPUSCHED_WEBHOOK_ALLOW_PRIVATE = True  # the receiver listens on loopback
    receiver = Receiver()
    try:
        WebhookEndpoint.objects.create(organization=priced, url=receiver.url,
                                       events=["credits.refunded"])
        _refunded_once(priced, operator, receiver)
    finally:
        receiver.close()


def _refunded_once(priced, operator, receiver) -> None:
    job = _ran(priced)
    spent = job_credits(job)["spent"]
    assert 100 <= spent <= 102
    before = wallet_of(priced).available
    assert job_refund(job=job, by=operator, note="ticket 4471") == spent
    assert job_credits(job) == {"held": 0, "spent": 0, "refunded": spent}
    assert wallet_of(priced).available == before + spent
    assert job_refund(job=job, by=operator) == 0  # repeated: nothing more
    refund = Transfer.objects.get(kind="REFUND", job=job)
    assert refund.memo == f"job {job.pk} refunded by op: ticket 4471"
    event = OrganizationEvent.objects.get(action="job.refunded")
    assert event.detail == {"job": job.pk, "credits": spent, "note": "ticket 4471"}
    delivery = WebhookDelivery.objects.get(event="credits.refunded")  # one: the second gave 0
    webhook_deliver(delivery.pk)  # if it was not sent as the refund committed
    (headers, body), = receiver.posts
    notice = json.loads(body)
    assert (notice["job"], notice["credits"], notice["note"]) == (
        job.pk, {"refunded": spent}, "ticket 4471")
    assert conforms(notice, {"$ref": "#/components/schemas/RefundNotice"},
                    openapi_document()) == []
    assert_ledger_consistent()


def test_a_part_is_refunded_from_the_wallet_drawn_last_and_never_past_what_it_spent(
        priced, operator):
    credits_grant(organization=priced, amount=60, promo=True)  # spent first
    job = _ran(priced)
    spent = job_credits(job)["spent"]
    promo = Account.objects.get(organization=priced, bucket="promo")
    assert promo.available == 0  # the job drew on it first, then on the paid wallet
    assert job_refund(job=job, by=operator, amount=30) == 30
    assert Account.objects.get(pk=promo.pk).available == 0  # the paid wallet's back first
    assert job_refund(job=job, by=operator, amount=10**6) == spent - 30  # the rest, no more
    assert Account.objects.get(pk=promo.pk).available == 60
    assert job_refund(job=job, by=operator, amount=1) == 0
    with pytest.raises(ValidationFailed):
        job_refund(job=job, by=operator, amount=0)
    assert_ledger_consistent()


def test_a_job_not_ended_is_refused_and_one_refunded_already_gets_nothing(priced, operator):
    running = make_job(priced)
    start_placed(running)
    with pytest.raises(Conflict) as refused:
        job_refund(job=running, by=operator)
    assert refused.value.code == "job_not_finished"
    make_node("n2", gpus=1)
    failed = _ran(priced, outcome="FAILED")  # delivered nothing: it pays nothing
    assert failed.state == "FAILED" and job_credits(failed)["spent"] == 0
    assert job_refund(job=failed, by=operator) == 0
    assert not OrganizationEvent.objects.filter(action="job.refunded").exists()
    assert_ledger_consistent()


def test_refunds_racing_refund_once(priced, operator):
    job = _ran(priced)
    spent = job_credits(job)["spent"]
    assert spent > 0
    refund = partial(job_refund, job=job, by=operator)
    assert race(refund, refund, refund) == []
    assert job_credits(job)["refunded"] == spent
    assert Transfer.objects.filter(kind="REFUND", job=job).count() == 1
    assert_ledger_consistent()


def test_an_operator_refunds_from_admin(client, priced, operator):
    client.force_login(operator)
    job = _ran(priced)
    spent = job_credits(job)["spent"]
    client.post("/admin/jobs/job/", {"action": "refund", "apply": "Refund", "note": "bad clip",
                                     "credits": "40", "_selected_action": [job.pk]})
    assert job_credits(job) == {"held": 0, "spent": spent - 40, "refunded": 40}
    client.post("/admin/jobs/job/", {"action": "refund", "apply": "Refund", "note": "bad clip",
                                     "_selected_action": [job.pk]})
    assert job_credits(job) == {"held": 0, "spent": 0, "refunded": spent}
