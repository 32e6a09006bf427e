"""An organization is told once, by webhook, when its available credits fall below its
threshold, and again only after they have risen back above it."""

import json
from datetime import timedelta

import pytest
from django.utils import timezone

from credits.models import GpuPrice
from credits.services.grants import credits_grant, expire_buckets
from jobs.api.openapi import openapi_document
from jobs.models import Organization, WebhookDelivery, WebhookEndpoint
from jobs.services.cancellation import job_cancel
from jobs.services.submission import JobSpec, job_submit
from jobs.services.webhooks import webhook_deliver
from tests.support.openapi import conforms
from tests.support.receiver import Receiver

# on_commit: the check runs after the ledger's transaction, as in the service
pytestmark = pytest.mark.django_db(transaction=True)
JOB = 3_000  # credits one job holds: 3,000 s of one GPU at 3,600 an hour


@pytest.fixture
def watched(alice):
    GpuPrice.objects.create(gpu_type="H100", credits_per_gpu_hour=3600)
    Organization.objects.filter(pk=alice.pk).update(low_credits_threshold=5_000)
    WebhookEndpoint.objects.create(organization=alice, url="https://93.184.216.34/hook",
                                   events=["job.succeeded", "credits.low"])
    credits_grant(organization=alice, amount=10_000)
    return alice


def _submit(org):
    return job_submit(organization=org, spec=JobSpec(prompt="x", time_limit_s=JOB))


def _notices() -> list[dict]:
    return [d.payload for d in WebhookDelivery.objects.filter(event="credits.low")
            .order_by("pk")]


def test_one_notice_per_fall_below_the_threshold(watched):
    first = _submit(watched)  # 7,000 left
    assert _notices() == []
    second = _submit(watched)  # 4,000 left: below 5,000
    assert _notices() == [{"event": "credits.low", "organization": "alice",
                           "credits": {"available": 4_000, "threshold": 5_000}}]
    third = _submit(watched)  # 1,000 left: still the same fall
    assert len(_notices()) == 1
    for job in (first, second, third):  # what they held comes back: above again
        job_cancel(job=job)
    assert Organization.objects.get(pk=watched.pk).low_credits_notified is False
    _submit(watched)
    _submit(watched)  # a new fall, a new notice
    assert [n["credits"]["available"] for n in _notices()] == [4_000, 4_000]


def test_a_grant_lifts_it_and_an_expiry_can_drop_it(watched):
    _submit(watched)
    _submit(watched)
    assert len(_notices()) == 1
    credits_grant(organization=watched, amount=6_000, promo=True,
                  expires_at=timezone.now() + timedelta(hours=1))  # 10,000 available
    assert Organization.objects.get(pk=watched.pk).low_credits_notified is False
    expire_buckets(now=timezone.now() + timedelta(hours=2))  # the promo credits expire
    assert [n["credits"]["available"] for n in _notices()] == [4_000, 4_000]


def test_no_threshold_no_notice_and_endpoints_choose_it(alice):
    GpuPrice.objects.create(gpu_type="H100", credits_per_gpu_hour=3600)
    WebhookEndpoint.objects.create(organization=alice, url="https://93.184.216.34/hook")
    credits_grant(organization=alice, amount=4_000)
    _submit(alice)
    assert Organization.objects.get(pk=alice.pk).low_credits_notified is False
    Organization.objects.filter(pk=alice.pk).update(low_credits_threshold=5_000)
    credits_grant(organization=alice, amount=1)  # checked again: below, and told so
    assert Organization.objects.get(pk=alice.pk).low_credits_notified is True
    assert _notices() == []  # its endpoint kept the default events, the ends of jobs


def test_the_notice_posted_is_what_the_api_document_says(watched, settings):
    settings.GPUSCHED_WEBHOOK_ALLOW_PRIVATE = True  # the receiver listens on loopback
    receiver = Receiver()
    try:
        WebhookEndpoint.objects.filter(organization=watched).update(url=receiver.url)
        _submit(watched)
        _submit(watched)
        webhook_deliver(WebhookDelivery.objects.get(event="credits.low").pk)
        (headers, body), = receiver.posts
    finally:
        receiver.close()
    notice, document = json.loads(body), openapi_document()
    assert conforms(notice, {"$ref": "#/components/schemas/CreditsNotice"}, document) == []
    assert headers["X-Gpusched-Event"] == "credits.low"
