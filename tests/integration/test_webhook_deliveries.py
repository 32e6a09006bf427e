"""An organization reads back what was sent to each of its endpoints (status, attempts, why
a send failed) and sends a delivery that failed, or that its receiver lost, again: posted
again to a real HTTP server under the same delivery id, never while a sender holds it, and
never another organization's."""

import hashlib
import hmac
import json
from datetime import timedelta

import pytest
from django.utils import timezone
from rest_framework.test import APIClient

from jobs.models import ApiKey, WebhookDelivery, WebhookEndpoint
from jobs.services.cancellation import job_cancel
from jobs.services.tenancy import api_key_issue
from jobs.services.webhook_endpoints import webhook_redeliver
from jobs.services.webhooks import (
    MAX_ATTEMPTS,
    expire_deliveries,
    webhook_deliver,
    webhooks_sweep,
)
from tests.support.factories import make_job, make_member
from tests.support.threads import race

pytestmark = pytest.mark.django_db


@pytest.fixture
def hook(alice, receiver) -> WebhookEndpoint:
    return WebhookEndpoint.objects.create(organization=alice, url=receiver.url)


def _failed(alice, receiver) -> WebhookDelivery:
    """A notice its endpoint refused every time it was sent."""
    job_cancel(job=make_job(alice))
    delivery = WebhookDelivery.objects.latest("pk")
    receiver.status = 503
    for _ in range(MAX_ATTEMPTS):
        WebhookDelivery.objects.filter(pk=delivery.pk).update(next_attempt_at=delivery.created_at)
        webhook_deliver(delivery.pk)
    delivery.refresh_from_db()
    assert delivery.status == "FAILED"
    return delivery


def test_an_organization_reads_what_was_sent_newest_first(api, alice, hook, receiver):
    failed = _failed(alice, receiver)
    receiver.status = 200
    job_cancel(job=make_job(alice))
    delivered = WebhookDelivery.objects.latest("pk")
    webhook_deliver(delivered.pk)
    answer = api.get(f"/api/v1/webhooks/{hook.pk}/deliveries").json()
    assert [(d["id"], d["status"], d["attempts"]) for d in answer["results"]] == [
        (delivered.pk, "DELIVERED", 1), (failed.pk, "FAILED", MAX_ATTEMPTS)]
    assert answer["results"][1]["last_error"] == "HTTP 503"
    assert answer["results"][1]["event"] == "job.cancelled"
    only = api.get(f"/api/v1/webhooks/{hook.pk}/deliveries?status=FAILED&limit=1").json()
    assert [d["id"] for d in only["results"]] == [failed.pk] and only["next"] is None
    page = api.get(f"/api/v1/webhooks/{hook.pk}/deliveries?limit=1").json()
    assert [d["id"] for d in page["results"]] == [delivered.pk]
    assert [d["id"] for d in api.get(page["next"]).json()["results"]] == [failed.pk]


def test_a_failed_delivery_is_sent_again_under_its_own_id(api, alice, hook, receiver):
    failed = _failed(alice, receiver)
    receiver.status, receiver.posts[:] = 200, []
    answer = api.post(f"/api/v1/webhooks/{hook.pk}/deliveries/{failed.pk}/redeliver")
    assert answer.status_code == 202
    assert (answer.json()["status"], answer.json()["attempts"]) == ("PENDING", 0)
    assert webhooks_sweep() == 1  # due now (its worker would take it at once)
    (headers, body), = receiver.posts
    assert json.loads(body)["delivery"] == failed.pk == int(headers["X-Gpusched-Delivery"])
    failed.refresh_from_db()
    assert (failed.status, failed.attempts, failed.last_error) == ("DELIVERED", 1, "")


def test_a_pending_delivery_keeps_its_schedule(api, alice, hook, receiver):
    job_cancel(job=make_job(alice))
    pending = WebhookDelivery.objects.get()
    before = pending.next_attempt_at
    answer = api.post(f"/api/v1/webhooks/{hook.pk}/deliveries/{pending.pk}/redeliver")
    assert answer.status_code == 202 and answer.json()["status"] == "PENDING"
    pending.refresh_from_db()
    assert (pending.next_attempt_at, pending.attempts) == (before, 0)


@pytest.mark.django_db(transaction=True)
def test_racing_resends_post_it_once(alice, hook, receiver):
    failed = _failed(alice, receiver)
    receiver.status, receiver.posts[:] = 200, []
    key = ApiKey.objects.get(organization=alice)
    race(lambda: webhook_redeliver(organization=alice, hook_id=hook.pk,
                                   delivery_id=failed.pk, api_key=key), 4)
    race(webhooks_sweep, 3)
    assert len(receiver.posts) == 1
    failed.refresh_from_db()
    assert (failed.status, failed.attempts) == ("DELIVERED", 1)


def test_nobody_reads_or_resends_another_organizations_deliveries(api, alice, bob, hook,
                                                                   receiver):
    failed = _failed(alice, receiver)
    theirs = APIClient()
    theirs.credentials(HTTP_AUTHORIZATION=f"Bearer {bob.raw_key}")
    assert theirs.get(f"/api/v1/webhooks/{hook.pk}/deliveries").status_code == 404
    answer = theirs.post(f"/api/v1/webhooks/{hook.pk}/deliveries/{failed.pk}/redeliver")
    assert (answer.status_code, answer.json()["error"]["code"]) == (404, "not_found")
    # alice's other endpoint does not reach this delivery either
    other = WebhookEndpoint.objects.create(organization=alice, url=hook.url)
    assert api.post(f"/api/v1/webhooks/{other.pk}/deliveries/{failed.pk}/redeliver"
                    ).status_code == 404
    failed.refresh_from_db()
    assert failed.status == "FAILED"


@pytest.mark.parametrize("query", ["status=LOST", "limit=0", "limit=x", "before=-1"])
def test_a_bad_question_is_a_400(api, hook, query):
    answer = api.get(f"/api/v1/webhooks/{hook.pk}/deliveries?{query}")
    assert (answer.status_code, answer.json()["error"]["code"]) == (400, "invalid")


def test_ended_deliveries_go_after_their_retention_and_pending_ones_stay(alice, hook,
                                                                        settings):
    settings.GPUSCHED_WEBHOOK_RETENTION_DAYS = 30
    for _ in range(4):
        job_cancel(job=make_job(alice))
    old_delivered, old_failed, old_pending, recent = WebhookDelivery.objects.order_by("pk")
    WebhookDelivery.objects.filter(pk=old_delivered.pk).update(status="DELIVERED")
    WebhookDelivery.objects.filter(pk__in=[old_failed.pk, recent.pk]).update(status="FAILED")
    now = timezone.now()
    WebhookDelivery.objects.exclude(pk=recent.pk).update(created_at=now - timedelta(days=31))
    assert expire_deliveries(now=now) == 2
    assert set(WebhookDelivery.objects.values_list("pk", flat=True)) == {
        old_pending.pk, recent.pk}
    settings.GPUSCHED_WEBHOOK_RETENTION_DAYS = 0  # kept for ever
    WebhookDelivery.objects.update(status="FAILED", created_at=now - timedelta(days=999))
    assert expire_deliveries(now=now) == 0 and WebhookDelivery.objects.count() == 2


def test_a_test_notice_reaches_the_receiver_signed_whatever_the_endpoints_events(
        api, alice, hook, receiver):
    answer = api.post(f"/api/v1/webhooks/{hook.pk}/ping")
    assert answer.status_code == 202
    assert (answer.json()["event"], answer.json()["status"]) == ("ping", "PENDING")
    assert webhooks_sweep() == 1
    (headers, body), = receiver.posts
    notice = json.loads(body)
    assert notice["event"] == "ping" == headers["X-Gpusched-Event"]
    assert (notice["organization"], notice["endpoint"]) == ("alice", hook.pk)
    signed = headers["X-Gpusched-Timestamp"].encode() + b"." + body
    assert headers["X-Gpusched-Signature"] == "sha256=" + hmac.new(
        hook.secret.encode(), signed, hashlib.sha256).hexdigest()
    listed = api.get(f"/api/v1/webhooks/{hook.pk}/deliveries").json()["results"]
    assert [(d["event"], d["status"]) for d in listed] == [("ping", "DELIVERED")]


def test_only_the_organizations_owners_and_full_keys_send_one(alice, bob, hook, client):
    other = APIClient()
    other.credentials(HTTP_AUTHORIZATION=f"Bearer {bob.raw_key}")
    assert other.post(f"/api/v1/webhooks/{hook.pk}/ping").status_code == 404
    narrow = APIClient()
    narrow.credentials(HTTP_AUTHORIZATION="Bearer " + api_key_issue(
        organization=alice, name="jobs", scope="jobs")[1])
    assert narrow.post(f"/api/v1/webhooks/{hook.pk}/ping").status_code == 403
    client.force_login(make_member(alice, "mia"))
    assert client.post(f"/dashboard/webhooks/alice/{hook.pk}/ping").status_code == 403
    assert not WebhookDelivery.objects.exists()
