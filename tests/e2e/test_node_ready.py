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


def _consumed() -> set[str]:
    queues = app.control.inspect(timeout=1).active_queues() or {}
    return {q["name"] for worker in queues.values() for q in worker}


def test_a_node_appears_only_once_its_worker_consumes_its_queue(processes):
    purge_broker_and_cache()
    name = f"ready-{uuid.uuid4().hex[:6]}"
    processes.node(name, 1)
    wait_for(lambda: Node.objects.filter(name=name).exists(), 90, "the node to register")
    # registered by the worker once its consumer runs (it connects first), not as it boots
    log = processes.log_of(f"node-{name}")
    assert log.index("Connected to") < log.index(f"node {name}: ")
    # and that consumer takes the node's queue; a broadcast reaches a worker only once its
    # event loop has subscribed, a moment after it consumes, so it is asked until it answers
    wait_for(lambda: node_queue(name) in _consumed(), 30, "the worker to name its queue")
