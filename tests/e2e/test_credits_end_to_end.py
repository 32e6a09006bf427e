"""Credits through real workers: a job that succeeds on a node pays its run, one that crashes
pays nothing, and a job the organization cannot pay for is refused at the door."""

import uuid

import pytest

from credits.models import GpuPrice, Hold, Transfer
from credits.services.grants import credits_grant
from credits.services.pricing import cost
from credits.services.statements import organization_balance
from jobs.models import Attempt, Job
from tests.support.broker import purge_broker_and_cache
from tests.support.ledger import assert_ledger_consistent
from tests.support.processes import ProcessGroup, wait_for
from workers.models import Node

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]
GRANT = 20_000


def _submit(api, **params):
    response = api.post("/api/v1/jobs", {"prompt": "a kite", "gpus": 1, "time_limit_s": 600,
                                         "params": {"progress_interval": 0.25, **params}},
                        format="json")
    return response


def test_a_job_pays_what_it_ran_and_a_crashed_one_nothing(alice, api):
    purge_broker_and_cache()
    GpuPrice.objects.create(gpu_type="H100", credits_per_gpu_hour=36_000)  # 10 a second
    credits_grant(organization=alice, amount=GRANT)
    # a crash is dead-lettered at once: no retries to wait for
    group = ProcessGroup(GPUSCHED_HEARTBEAT_SECONDS="0.5", GPUSCHED_MAX_RETRIES="0")
    try:
        name = f"cred-{uuid.uuid4().hex[:6]}"
        group.node(name, 2)
        wait_for(lambda: Node.objects.filter(name=name).exists(), 60, "the node")
        group.scheduler()
        ok = _submit(api, run_seconds=2).json()["id"]
        crashed = _submit(api, run_seconds=2, fail="crash", fail_at=0.5).json()["id"]
        # 6,000 per job held: a fourth would need more than is left
        assert _submit(api).status_code == 202
        refused = _submit(api)
        assert refused.status_code == 402, refused.content
        assert refused.json()["error"]["code"] == "insufficient_credits"
        wait_for(lambda: Job.objects.filter(pk__in=[ok, crashed], finished_at__isnull=False
                                            ).count() == 2, 90, "both jobs to end")
    finally:
        group.stop_all()
    assert Job.objects.get(pk=ok).state == "SUCCEEDED"
    assert Job.objects.get(pk=crashed).state == "DEAD"
    run = Attempt.objects.get(job_id=ok)
    paid = cost(run.credits_per_hour, (run.ended_at - run.started_at).total_seconds())
    assert run.credits_per_hour == 36_000 and paid >= 20
    assert sum(Transfer.objects.filter(job_id=ok, kind="POST").values_list("amount", flat=True)
               ) == paid
    assert Hold.objects.filter(job_id__in=[ok, crashed], closed_at__isnull=True).count() == 0
    balance = organization_balance(alice)
    assert balance["available"] + balance["held"] == GRANT - paid
    assert_ledger_consistent()
