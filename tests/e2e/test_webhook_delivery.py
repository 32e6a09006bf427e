"""A job that succeeds on a real node is announced by the webhook worker: the end commits in
the node's worker, the notice goes through the broker to the notify queue's worker, and the
receiver gets one signed POST."""

import json
import uuid

import pytest

from jobs.models import Job, WebhookDelivery, WebhookEndpoint
from tests.support.broker import purge_broker_and_cache
from tests.support.factories import make_job
from tests.support.processes import ProcessGroup, wait_for
from tests.support.receiver import Receiver
from workers.models import Node

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]


def test_a_succeeded_job_is_announced_once(alice):
    purge_broker_and_cache()
    receiver = Receiver()
    WebhookEndpoint.objects.create(organization=alice, url=receiver.url)
    # the receiver listens on loopback, which tenants' webhooks may not reach by default
    group = ProcessGroup(GPUSCHED_HEARTBEAT_SECONDS="0.5", GPUSCHED_WEBHOOK_ALLOW_PRIVATE="1")
    try:
        name = f"hook-{uuid.uuid4().hex[:6]}"
        group.node(name, 1)
        wait_for(lambda: Node.objects.filter(name=name).exists(), 60, "the node")
        group.scheduler()
        group.celery("notify", "worker", "-Q", "notify", "-c", "1", "--hostname=notify@%h",
                     "--without-gossip", "--without-mingle")
        job = make_job(alice, run_seconds=1, progress_interval=0.25)
        wait_for(lambda: Job.objects.get(pk=job.pk).state == "SUCCEEDED", 90, "the job")
        wait_for(lambda: receiver.posts, 60, "the notice")
        # the worker records the answer after the receiver has it: stopping it before then
        # would leave the delivery for the sweep to send again (deliveries are at least once)
        wait_for(lambda: WebhookDelivery.objects.get().status != "PENDING", 30,
                 "the answer recorded")
    finally:
        group.stop_all()
        receiver.close()
    (headers, body), = receiver.posts
    assert headers["X-Gpusched-Event"] == "job.succeeded"
    announced = json.loads(body)["job"]
    assert (announced["id"], announced["state"]) == (job.pk, "SUCCEEDED")
    assert announced["output_url"]  # where the client fetches the video
    assert WebhookDelivery.objects.get().status == "DELIVERED"
