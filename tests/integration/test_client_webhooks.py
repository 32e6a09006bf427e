"""The client's check of a webhook notice, on notices the service really sent."""

import time

import pytest

from gpusched_client.webhooks import InvalidNotice, verify
from jobs.models import WebhookDelivery
from jobs.services.cancellation import job_cancel
from jobs.services.webhooks import webhook_deliver
from tests.support.factories import make_job

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def sent(api, alice, receiver):
    """A notice posted to the receiver, with the secret its endpoint was made with."""
    made = api.post("/api/v1/webhooks", {"url": receiver.url}, format="json").json()
    job_cancel(job=make_job(alice))
    webhook_deliver(WebhookDelivery.objects.get().pk)
    (headers, body), = receiver.posts
    return headers, body, made


def test_a_sent_notice_verifies_and_a_changed_one_does_not(sent):
    headers, body, made = sent
    assert verify(body, headers, made["secret"])["event"] == "job.cancelled"
    lowered = {k.lower(): v for k, v in headers.items()}  # as some frameworks hand them
    assert verify(body, lowered, made["secret"])["delivery"] > 0
    for changed, secret in ((body.replace(b"CANCELLED", b"SUCCEEDED"), made["secret"]),
                            (body, "whsec-not-it")):
        with pytest.raises(InvalidNotice, match="not signed"):
            verify(changed, headers, secret)
    with pytest.raises(InvalidNotice, match="more than 300 s"):  # a replay, ten minutes on
        verify(body, headers, made["secret"], now=time.time() + 600)


def test_during_a_rotation_either_secret_verifies(sent, api, receiver):
    _, _, made = sent
    rotated = api.post(f"/api/v1/webhooks/{made['id']}/rotate-secret").json()
    receiver.posts.clear()
    WebhookDelivery.objects.all().delete()
    ping = api.post(f"/api/v1/webhooks/{made['id']}/ping")
    assert ping.status_code == 202
    webhook_deliver(ping.json()["id"])  # as the notify worker would
    (headers, body), = receiver.posts
    for secret in (made["secret"], rotated["secret"], [rotated["secret"], "other"]):
        assert verify(body, headers, secret)["event"] == "ping"
