"""A node is registered, and so takes work, only once its worker consumes its queue: work sent
to a worker still booting could outwait its lease and run twice."""

import uuid

import pytest

from gpusched.celery import app
from tests.support.broker import purge_broker_and_cache
from tests.support.processes import wait_for
from workers.models import Node
from workers.queues import node_queue

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]


def test_a_node_appears_only_once_its_worker_consumes_its_queue(processes):
    purge_broker_and_cache()
    name = f"ready-{uuid.uuid4().hex[:6]}"
    processes.node(name, 1)
    wait_for(lambda: Node.objects.filter(name=name).exists(), 90, "the node to register")
    # asked the moment the node appears: a worker still booting would not answer
    queues = app.control.inspect(timeout=3).active_queues() or {}
    consumed = {q["name"] for worker in queues.values() for q in worker}
    assert node_queue(name) in consumed
