"""An organization's owners add and remove its webhook endpoints on the dashboard and send a
failed delivery again; members see every endpoint and what was sent to it, and change
nothing; nobody reaches another organization's."""

import re

import pytest

from jobs.models import WebhookDelivery, WebhookEndpoint
from jobs.services.cancellation import job_cancel
from jobs.services.webhooks import webhooks_sweep
from tests.support.factories import make_job, make_member

pytestmark = pytest.mark.django_db


def test_an_owner_adds_an_endpoint_and_its_secret_is_shown_once(owner, alice, receiver):
    answer = owner.post("/dashboard/webhooks/alice", {
        "url": receiver.url, "events": ["job.succeeded", "job.running"]})
    assert answer.status_code == 200 and answer["Cache-Control"] == "no-store"
    secret = re.search(r'class="new-secret">([^<]+)<', answer.content.decode()).group(1)
    hook = WebhookEndpoint.objects.get()
    assert (hook.organization, hook.url, hook.secret) == (alice, receiver.url, secret)
    assert hook.events == ["job.succeeded", "job.running"]  # in the order events are listed
    page = owner.get("/dashboard/webhooks").content.decode()
    assert receiver.url in page and secret not in page


@pytest.mark.parametrize("form, words", [
    ({"url": "ftp://example.com/x", "events": ["job.succeeded"]}, "url"),
    ({"url": "http://10.0.0.7/hook", "events": ["job.succeeded"]}, "non-public address"),
    ({"url": "https://93.184.216.34/x"}, "events"),
    ({"url": "https://93.184.216.34/x", "events": ["job.exploded"]}, "events"),
])
def test_a_bad_endpoint_is_refused_and_nothing_is_made(owner, form, words):
    answer = owner.post("/dashboard/webhooks/alice", form)
    assert answer.status_code == 400 and words in answer.content.decode()
    assert not WebhookEndpoint.objects.exists()


def test_the_eleventh_endpoint_is_refused(owner, alice):
    for i in range(10):
        WebhookEndpoint.objects.create(organization=alice, url=f"https://93.184.216.34/{i}")
    answer = owner.post("/dashboard/webhooks/alice", {"url": "https://93.184.216.34/x",
                                                      "events": ["job.succeeded"]})
    assert answer.status_code == 409 and WebhookEndpoint.objects.count() == 10


def test_an_owner_sends_a_failed_delivery_again_and_removes_an_endpoint(owner, alice,
                                                                         receiver):
    hook = WebhookEndpoint.objects.create(organization=alice, url=receiver.url)
    job_cancel(job=make_job(alice))
    delivery = WebhookDelivery.objects.get()
    WebhookDelivery.objects.filter(pk=delivery.pk).update(
        status="FAILED", attempts=8, last_error="HTTP 503")
    page = owner.get("/dashboard/webhooks").content.decode()
    assert "HTTP 503" in page and "Send again" in page
    answer = owner.post(f"/dashboard/webhooks/alice/{hook.pk}/deliveries/{delivery.pk}/resend",
                        follow=True)
    assert f"Delivery {delivery.pk} (job.cancelled) is sent again" in answer.content.decode()
    assert webhooks_sweep() == 1 and len(receiver.posts) == 1
    assert WebhookDelivery.objects.get().status == "DELIVERED"

    answer = owner.post(f"/dashboard/webhooks/alice/{hook.pk}/delete", follow=True)
    assert "nothing more is sent to it" in answer.content.decode()
    assert not WebhookEndpoint.objects.exists() and not WebhookDelivery.objects.exists()


def test_a_member_sees_what_was_sent_and_changes_nothing(client, alice):
    hook = WebhookEndpoint.objects.create(organization=alice, url="https://93.184.216.34/h")
    job_cancel(job=make_job(alice))
    delivery = WebhookDelivery.objects.get()
    WebhookDelivery.objects.filter(pk=delivery.pk).update(status="FAILED", last_error="HTTP 500")
    client.force_login(make_member(alice, "mia"))
    page = client.get("/dashboard/webhooks").content.decode()
    assert hook.url in page and "HTTP 500" in page
    assert "Send again" not in page and "Add an endpoint" not in page and "Remove" not in page
    assert client.post("/dashboard/webhooks/alice", {"url": "https://93.184.216.34/x",
                                                     "events": ["job.succeeded"]}
                       ).status_code == 403
    assert client.post(f"/dashboard/webhooks/alice/{hook.pk}/delete").status_code == 403
    assert client.post(f"/dashboard/webhooks/alice/{hook.pk}/deliveries/{delivery.pk}/resend"
                       ).status_code == 403
    assert WebhookEndpoint.objects.count() == 1
    assert WebhookDelivery.objects.get().status == "FAILED"


def test_nobody_reaches_another_organizations_webhooks(owner, bob):
    hook = WebhookEndpoint.objects.create(organization=bob, url="https://93.184.216.34/bob")
    job_cancel(job=make_job(bob))
    delivery = WebhookDelivery.objects.get()
    assert hook.url not in owner.get("/dashboard/webhooks").content.decode()
    assert owner.post("/dashboard/webhooks/bob", {"url": "https://93.184.216.34/x",
                                                  "events": ["job.succeeded"]}
                      ).status_code == 404
    assert owner.post(f"/dashboard/webhooks/bob/{hook.pk}/delete").status_code == 404
    # its own organization's path with another's endpoint: no such endpoint
    assert owner.post(f"/dashboard/webhooks/alice/{hook.pk}/delete").status_code == 404
    assert owner.post(f"/dashboard/webhooks/alice/{hook.pk}/deliveries/{delivery.pk}/resend"
                      ).status_code == 404
    assert WebhookEndpoint.objects.filter(pk=hook.pk).exists()


def test_an_owner_rotates_a_secret_and_sees_the_new_one_once(owner, client, alice):
    hook = WebhookEndpoint.objects.create(organization=alice, url="https://93.184.216.34/h")
    before = hook.secret
    answer = owner.post(f"/dashboard/webhooks/alice/{hook.pk}/rotate")
    assert answer.status_code == 200 and answer["Cache-Control"] == "no-store"
    hook.refresh_from_db()
    page = answer.content.decode()
    assert hook.secret in page and before not in page and "move your receiver to this one" in page
    assert (hook.previous_secret, hook.previous_secret_until is not None) == (before, True)
    assert hook.secret not in owner.get("/dashboard/webhooks").content.decode()


def test_an_owner_sends_a_test_notice_and_sees_it_arrive(owner, alice, receiver):
    hook = WebhookEndpoint.objects.create(organization=alice, url=receiver.url,
                                          events=["job.succeeded"])
    answer = owner.post(f"/dashboard/webhooks/alice/{hook.pk}/ping", follow=True)
    assert "A test notice is on its way" in answer.content.decode()
    assert webhooks_sweep() == 1 and len(receiver.posts) == 1
    page = owner.get("/dashboard/webhooks").content.decode()
    assert "<td>ping</td>" in page and "DELIVERED" in page
