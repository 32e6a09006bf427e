"""A job's end is announced to its organization's endpoints: owed in the transaction of the
end, posted signed to a real HTTP server, retried with backoff while refused, given up after
the last attempt, and never posted twice at once."""

import hashlib
import hmac
import json
from datetime import timedelta

import pytest
from django.utils import timezone
from rest_framework.test import APIClient

from jobs.models import ApiKey, WebhookDelivery, WebhookEndpoint
from jobs.services.cancellation import job_cancel
from jobs.services.errors import Conflict
from jobs.services.webhook_endpoints import webhook_endpoint_create
from jobs.services.webhooks import MAX_ATTEMPTS, webhook_deliver, webhooks_sweep
from tests.support.factories import make_job
from tests.support.threads import race

pytestmark = pytest.mark.django_db


def _due_now(delivery: WebhookDelivery) -> None:
    WebhookDelivery.objects.filter(pk=delivery.pk).update(next_attempt_at=timezone.now())


def test_a_jobs_end_is_posted_signed_to_each_active_endpoint(alice, bob, receiver):
    endpoint = WebhookEndpoint.objects.create(organization=alice, url=receiver.url)
    WebhookEndpoint.objects.create(organization=alice, url=receiver.url, active=False)
    WebhookEndpoint.objects.create(organization=bob, url=receiver.url)
    job = job_cancel(job=make_job(alice))
    delivery = WebhookDelivery.objects.get()  # one: alice's active endpoint only
    assert (delivery.endpoint, delivery.event) == (endpoint, "job.cancelled")

    assert webhook_deliver(delivery.pk) == "DELIVERED"
    assert webhook_deliver(delivery.pk) is None  # delivered: never posted again
    (headers, body), = receiver.posts
    payload = json.loads(body)
    assert (payload["event"], payload["job"]["id"], payload["job"]["state"],
            payload["delivery"]) == ("job.cancelled", job.pk, "CANCELLED", delivery.pk)
    signed = headers["X-Gpusched-Timestamp"].encode() + b"." + body
    expected = hmac.new(endpoint.secret.encode(), signed, hashlib.sha256).hexdigest()
    assert headers["X-Gpusched-Signature"] == f"sha256={expected}"


def test_a_refused_notice_is_retried_with_backoff_then_given_up(alice, receiver):
    WebhookEndpoint.objects.create(organization=alice, url=receiver.url)
    job_cancel(job=make_job(alice))
    delivery = WebhookDelivery.objects.get()
    receiver.status = 503
    assert webhook_deliver(delivery.pk) == "PENDING"
    delivery.refresh_from_db()
    assert delivery.attempts == 1 and delivery.last_error == "HTTP 503"
    assert delivery.next_attempt_at > timezone.now() + timedelta(seconds=25)
    assert webhooks_sweep() == 0  # not due yet
    for _ in range(MAX_ATTEMPTS - 1):
        _due_now(delivery)
        assert webhooks_sweep() == 1
    delivery.refresh_from_db()
    assert (delivery.status, delivery.attempts) == ("FAILED", MAX_ATTEMPTS)
    assert len(receiver.posts) == MAX_ATTEMPTS


def test_an_unreachable_endpoint_is_an_attempt_not_an_error(alice, settings):
    settings.GPUSCHED_WEBHOOK_ALLOW_PRIVATE = True
    WebhookEndpoint.objects.create(organization=alice, url="http://127.0.0.1:9/nobody")
    job_cancel(job=make_job(alice))
    delivery = WebhookDelivery.objects.get()
    assert webhook_deliver(delivery.pk) == "PENDING"
    delivery.refresh_from_db()
    assert delivery.last_error.startswith("unreachable")


def test_a_claimed_notice_is_not_posted_by_a_second_sender(alice, receiver):
    WebhookEndpoint.objects.create(organization=alice, url=receiver.url)
    job_cancel(job=make_job(alice))
    delivery = WebhookDelivery.objects.get()
    # a sender claimed it a moment ago and is still posting: it is not due for the sweep
    WebhookDelivery.objects.filter(pk=delivery.pk).update(
        next_attempt_at=timezone.now() + timedelta(seconds=50))
    assert webhooks_sweep() == 0 and webhook_deliver(delivery.pk) is None
    assert receiver.posts == []


def test_a_receiver_that_answers_a_byte_at_a_time_is_given_up_on(alice, receiver,
                                                                  monkeypatch):
    """Each byte comes within a socket's timeout; the whole send still ends by its deadline,
    well inside the claim, so the sweep never posts it a second time meanwhile."""
    import jobs.services.webhooks as webhooks

    monkeypatch.setattr(webhooks, "SEND_DEADLINE_S", 1.0)
    WebhookEndpoint.objects.create(organization=alice, url=receiver.url)
    job_cancel(job=make_job(alice))
    delivery = WebhookDelivery.objects.get()
    receiver.drip_s = 0.5  # its answer would take some ten seconds
    assert webhook_deliver(delivery.pk) == "PENDING"
    delivery.refresh_from_db()
    assert delivery.attempts == 1 and delivery.last_error.startswith("unreachable")


@pytest.mark.django_db(transaction=True)
def test_a_sender_whose_claim_ran_out_writes_nothing_over_the_next(alice, receiver):
    from django.db import connection

    WebhookEndpoint.objects.create(organization=alice, url=receiver.url)
    job_cancel(job=make_job(alice))
    delivery = WebhookDelivery.objects.get()
    receiver.status = 503

    def claimed_again_meanwhile():  # as a second sender does once the first's claim ran out
        try:
            WebhookDelivery.objects.filter(pk=delivery.pk).update(
                next_attempt_at=timezone.now() + timedelta(seconds=300), attempts=5)
        finally:
            connection.close()  # the receiver's thread's own

    receiver.on_post = claimed_again_meanwhile
    assert webhook_deliver(delivery.pk) == "PENDING"
    delivery.refresh_from_db()
    assert delivery.attempts == 5  # the later sender's, not this one's 1


def test_a_job_that_does_not_end_owes_no_notice(alice, receiver):
    WebhookEndpoint.objects.create(organization=alice, url=receiver.url)
    make_job(alice)
    assert not WebhookDelivery.objects.exists()


def test_clients_manage_their_endpoints_through_the_api(api, bob):
    made = api.post("/api/v1/webhooks", {"url": "https://93.184.216.34/hook"}, format="json")
    assert made.status_code == 201
    hook = made.json()
    assert len(hook["secret"]) == 64  # given once, to check the signatures with
    listed = api.get("/api/v1/webhooks").json()["results"]
    assert [h["url"] for h in listed] == ["https://93.184.216.34/hook"]
    assert "secret" not in listed[0]
    for bad in ("ftp://93.184.216.34/x", "not a url", "", "http://a\x00b.com/", "http://\ud800/"):
        # JSON escapes the lone surrogate, as a client's encoder would
        refused = api.post("/api/v1/webhooks", json.dumps({"url": bad}),
                           content_type="application/json")
        assert (refused.status_code, refused.json()["error"]["code"]) == (400, "invalid")
    other = APIClient()
    other.credentials(HTTP_AUTHORIZATION=f"Bearer {bob.raw_key}")
    assert other.delete(f"/api/v1/webhooks/{hook['id']}").status_code == 404
    assert api.delete(f"/api/v1/webhooks/{hook['id']}").status_code == 204
    assert api.get("/api/v1/webhooks").json()["results"] == []


def test_an_organization_has_at_most_ten_endpoints(api):
    for i in range(10):
        api.post("/api/v1/webhooks", {"url": f"https://93.184.216.34/{i}"}, format="json")
    refused = api.post("/api/v1/webhooks", {"url": "https://93.184.216.34/x"}, format="json")
    assert (refused.status_code, refused.json()["error"]["code"]) == (409, "too_many_webhooks")


@pytest.mark.django_db(transaction=True)
def test_racing_requests_do_not_pass_the_limit_together(alice):
    for i in range(8):
        WebhookEndpoint.objects.create(organization=alice, url=f"https://93.184.216.34/{i}")
    key, refused = ApiKey.objects.get(organization=alice), []

    def add() -> None:
        try:
            webhook_endpoint_create(organization=alice, url="https://93.184.216.34/x",
                                    api_key=key)
        except Conflict:
            refused.append(1)

    race(add, 6)
    assert WebhookEndpoint.objects.count() == 10 and len(refused) == 4


@pytest.mark.django_db(transaction=True)
def test_an_endpoint_is_told_of_the_moves_it_chose(alice, receiver):
    from jobs.models import Attempt
    from jobs.scheduler.tick import scheduler_tick_run
    from tests.support.factories import make_node
    from workers.services.attempts import AttemptResult, attempt_finish, attempt_start

    ends = WebhookEndpoint.objects.create(organization=alice, url=receiver.url)
    starts = WebhookEndpoint.objects.create(organization=alice, url=receiver.url,
                                            events=["job.running", "job.failed"])
    make_node("n1", gpus=1)
    job = make_job(alice)
    scheduler_tick_run()
    attempt = Attempt.objects.get(job=job)
    attempt_start(attempt_id=attempt.pk, token=attempt.token)
    attempt_finish(attempt_id=attempt.pk, token=attempt.token,
                   result=AttemptResult("SUCCEEDED", 0))
    told = sorted(WebhookDelivery.objects.values_list("endpoint_id", "event"))
    assert told == sorted([(starts.pk, "job.running"), (ends.pk, "job.succeeded")])


def test_clients_choose_events_and_unknown_ones_are_a_400(api):
    made = api.post("/api/v1/webhooks", {"url": "https://93.184.216.34/h", "events": [
        "job.running", "job.dead", "job.running"]}, format="json")
    assert made.status_code == 201 and made.json()["events"] == ["job.dead", "job.running"]
    default = api.post("/api/v1/webhooks", {"url": "https://93.184.216.34/i"}, format="json").json()
    assert default["events"] == ["job.succeeded", "job.failed", "job.timed_out",
                                 "job.cancelled", "job.dead"]
    for events in (["job.queued"], [], "job.running"):
        bad = api.post("/api/v1/webhooks", {"url": "https://93.184.216.34/j", "events": events},
                       format="json")
        assert bad.status_code == 400 and "events" in bad.json()["error"]["fields"]


def test_operators_cannot_save_an_unknown_event(alice):
    from django.core.exceptions import ValidationError

    for events in (["job.queued"], [], "job.running"):
        with pytest.raises(ValidationError):
            WebhookEndpoint(organization=alice, url="https://93.184.216.34/", events=events
                            ).full_clean()


@pytest.mark.django_db(transaction=True)
def test_a_notice_is_what_the_api_document_says_with_the_settled_credits(alice, receiver):
    from credits.models import GpuPrice
    from credits.services.grants import credits_grant
    from jobs.api.openapi import openapi_document
    from tests.support.factories import make_node, run_placed_job
    from tests.support.openapi import conforms

    GpuPrice.objects.create(gpu_type="H100", credits_per_gpu_hour=3600)
    credits_grant(organization=alice, amount=100_000)
    WebhookEndpoint.objects.create(organization=alice, url=receiver.url)
    make_node("n1", gpus=1)
    run_placed_job(make_job(alice), ran_for_s=30)
    webhook_deliver(WebhookDelivery.objects.get().pk)
    (_, body), = receiver.posts
    notice = json.loads(body)
    document = openapi_document()
    assert document["webhooks"]["jobMoved"]["post"]["requestBody"]["content"][
        "application/json"]["schema"] == {"$ref": "#/components/schemas/Notice"}
    assert conforms(notice, {"$ref": "#/components/schemas/Notice"}, document) == []
    credits = notice["job"]["credits"]
    assert credits["held"] == 0 and 30 <= credits["spent"] <= 31


@pytest.mark.django_db(transaction=True)
def test_a_job_waiting_to_retry_is_posted_with_its_retry_and_when(alice, receiver, settings):
    from jobs.api.openapi import openapi_document
    from tests.support.factories import make_node, start_placed
    from tests.support.openapi import conforms
    from workers.services.attempts import AttemptResult, attempt_finish

    settings.GPUSCHED_RETRY_BACKOFF_S = 60
    WebhookEndpoint.objects.create(organization=alice, url=receiver.url, events=["job.retry_wait"])
    make_node("n1", gpus=1)
    attempt = start_placed(make_job(alice))
    job = attempt_finish(attempt_id=attempt.pk, token=attempt.token,
                         result=AttemptResult("FAILED", 1, "boom", None, "exit_1"))
    webhook_deliver(WebhookDelivery.objects.get().pk)
    (_, body), = receiver.posts
    notice = json.loads(body)
    assert conforms(notice, {"$ref": "#/components/schemas/Notice"}, openapi_document()) == []
    assert (notice["event"], notice["job"]["retries"]) == ("job.retry_wait", 1)
    assert notice["job"]["retry_at"] == job.retry_at.isoformat()


def _signed_with(secret: str, headers: dict, body: bytes) -> bool:
    signed = headers["X-Gpusched-Timestamp"].encode() + b"." + body
    mine = "sha256=" + hmac.new(secret.encode(), signed, hashlib.sha256).hexdigest()
    return mine in headers["X-Gpusched-Signature"].split(",")


def test_a_rotated_secret_signs_at_once_and_the_one_before_for_a_day(api, alice, bob,
                                                                      receiver):
    made = api.post("/api/v1/webhooks", {"url": receiver.url}, format="json").json()
    rotated = api.post(f"/api/v1/webhooks/{made['id']}/rotate-secret")
    assert rotated.status_code == 200
    new = rotated.json()["secret"]
    assert new != made["secret"] and len(new) == 64
    job_cancel(job=make_job(alice))
    webhook_deliver(WebhookDelivery.objects.latest("pk").pk)
    (headers, body), = receiver.posts
    assert headers["X-Gpusched-Signature"].count("sha256=") == 2
    assert _signed_with(new, headers, body) and _signed_with(made["secret"], headers, body)
    # a day later the old one signs no more
    WebhookEndpoint.objects.filter(pk=made["id"]).update(
        previous_secret_until=timezone.now() - timedelta(seconds=1))
    job_cancel(job=make_job(alice))
    webhook_deliver(WebhookDelivery.objects.latest("pk").pk)
    headers, body = receiver.posts[1]
    assert _signed_with(new, headers, body) and not _signed_with(made["secret"], headers, body)
    theirs = APIClient()
    theirs.credentials(HTTP_AUTHORIZATION=f"Bearer {bob.raw_key}")
    assert theirs.post(f"/api/v1/webhooks/{made['id']}/rotate-secret").status_code == 404
    assert WebhookEndpoint.objects.get(pk=made["id"]).secret == new
