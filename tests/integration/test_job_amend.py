"""PATCH /api/v1/jobs/{id}: a waiting job takes the relaxation its pending reason offers and
keeps its wait. Attacked: fields that may not change, jobs that ran, a refused hold, a round
that read the old request, and a change racing the rounds (invariants 2, 4 and 5)."""

from datetime import timedelta

import pytest
from django.utils import timezone
from rest_framework.test import APIClient

from credits.models import GpuPrice, Hold
from credits.services.grants import credits_grant
from jobs.models import GpuBinding, Job, JobEvent
from jobs.scheduler.tick import scheduler_tick_run
from tests.support.factories import make_node
from tests.support.ledger import assert_ledger_consistent, wallet_of
from tests.support.threads import race

pytestmark = pytest.mark.django_db(transaction=True)


def _submit(api, **spec) -> int:
    answer = api.post("/api/v1/jobs", {"prompt": "a heron", **spec}, format="json")
    assert answer.status_code == 202, answer.json()
    return answer.json()["id"]


def _patch(api, job_id: int, **changes):
    return api.patch(f"/api/v1/jobs/{job_id}", changes, format="json")


def _blocked_on_h100(api) -> int:
    """A 4-GPU H100 job that waits while an A100 node of 8 stands free."""
    make_node("h", gpus=4)
    make_node("a", gpus=8, gpu_type="A100")
    _submit(api, gpus=4, gpu_types=["H100"])
    scheduler_tick_run()  # the first takes the only H100 node
    job_id = _submit(api, gpus=4, gpu_types=["H100"])
    scheduler_tick_run()
    return job_id


def test_a_waiting_job_takes_the_relaxation_it_was_offered_and_keeps_its_wait(api):
    job_id = _blocked_on_h100(api)
    before = Job.objects.get(pk=job_id)
    pending = api.get(f"/api/v1/jobs/{job_id}").json()["pending"]
    assert "A100" in pending["what_if"]
    assert pending["relaxation"] == {"gpu_types": ["H100", "A100"]}

    answer = _patch(api, job_id, **pending["relaxation"])  # taken as it is offered
    assert answer.status_code == 200
    body = answer.json()
    assert body["gpu_types"] == ["H100", "A100"] and body["version"] == before.version + 1
    assert body["pending"]["code"] == "new"  # the old reason was for the old request
    job = Job.objects.get(pk=job_id)
    assert job.enqueued_at == before.enqueued_at  # its wait goes on
    event = JobEvent.objects.filter(job=job).last()
    assert (event.from_state, event.to_state, event.version) == ("QUEUED", "QUEUED", job.version)
    assert event.data == {"changed": {"gpu_types": [["H100"], ["H100", "A100"]]}}

    scheduler_tick_run()
    job.refresh_from_db()
    assert job.state == "SCHEDULED"
    assert set(GpuBinding.objects.filter(attempt__job=job).values_list(
        "gpu__node__name", flat=True)) == {"a"}


def test_a_change_drops_the_gpus_promised_for_the_old_request(api):
    from workers.models import Node

    make_node("h", gpus=4)
    job_id = _submit(api, gpus=4)
    Job.objects.filter(pk=job_id).update(nominated_node=Node.objects.get(name="h"),
                                         nominated_gpus=[0, 1, 2, 3])
    assert _patch(api, job_id, gpus=2).status_code == 200
    job = Job.objects.get(pk=job_id)
    assert (job.nominated_node, job.nominated_gpus) == (None, [])
    scheduler_tick_run()  # and it waits in the queue again, as asked now
    assert GpuBinding.objects.filter(attempt__job_id=job_id).count() == 2


def test_a_change_that_changes_nothing_writes_nothing(api):
    job_id = _submit(api, gpus=2)
    version = Job.objects.get(pk=job_id).version
    assert _patch(api, job_id, gpus=2).status_code == 200
    assert Job.objects.get(pk=job_id).version == version
    assert JobEvent.objects.filter(job_id=job_id).count() == 1


@pytest.mark.parametrize("changes,status,code", [
    ({"prompt": "another"}, 400, "not_amendable"),
    ({"preemptible": False}, 400, "not_amendable"),
    ({"gpu_typ": ["A100"]}, 400, "not_amendable"),  # a misspelt field is not ignored
    ({"gpus": 0}, 400, "invalid"),
    ({"gpus": 65}, 400, "invalid"),
    ({"min_gpus": 8}, 400, "min_gpus_out_of_range"),
    ({"gpus": 1, "min_gpus": 2}, 400, "min_gpus_out_of_range"),
    ({"time_limit_s": 10**9}, 400, "time_limit_out_of_range"),
])
def test_what_may_not_change_is_refused_with_a_code_and_changes_nothing(api, changes, status,
                                                                         code):
    job_id = _submit(api, gpus=4, min_gpus=2)
    before = Job.objects.get(pk=job_id)
    answer = _patch(api, job_id, **changes)
    assert answer.status_code == status and answer.json()["error"]["code"] == code
    after = Job.objects.get(pk=job_id)
    assert (after.version, after.gpus, after.min_gpus, after.prompt) == (
        before.version, 4, 2, "a heron")


def test_another_organizations_job_is_a_404(api, bob):
    job_id = _submit(api)
    other = APIClient()
    other.credentials(HTTP_AUTHORIZATION=f"Bearer {bob.raw_key}")
    assert _patch(other, job_id, gpus=2).status_code == 404
    assert Job.objects.get(pk=job_id).gpus == 1


def test_only_a_waiting_job_that_never_ran_can_change(api):
    from workers.services.reaper import reap_expired_attempts, release_due_retries

    make_node("n", gpus=4)
    job_id = _submit(api, gpus=2)
    scheduler_tick_run()
    answer = _patch(api, job_id, gpus=1)
    assert answer.status_code == 409 and answer.json()["error"]["code"] == "job_not_queued"
    later = timezone.now() + timedelta(hours=1)
    reap_expired_attempts(now=later)  # its node went silent: lost, then queued again
    release_due_retries(now=later + timedelta(hours=1))
    assert Job.objects.get(pk=job_id).state == "QUEUED"
    answer = _patch(api, job_id, gpus=1)
    assert answer.status_code == 409 and answer.json()["error"]["code"] == "job_started"
    assert Job.objects.get(pk=job_id).gpus == 2


@pytest.fixture
def priced(db):
    GpuPrice.objects.create(gpu_type="H100", credits_per_gpu_hour=3600)  # a credit a second


def test_a_change_holds_for_the_new_request_or_is_refused_whole(api, alice, priced):
    credits_grant(organization=alice, amount=3_000)
    job_id = _submit(api, gpus=2, time_limit_s=600)
    (first,) = Hold.objects.filter(job_id=job_id)
    assert first.amount == 1_200

    refused = _patch(api, job_id, gpus=8)  # 4,800 against the 3,000 it has
    assert refused.status_code == 402
    assert refused.json()["error"]["code"] == "insufficient_credits"
    assert Job.objects.get(pk=job_id).gpus == 2
    assert list(Hold.objects.filter(job_id=job_id, closed_at__isnull=True)) == [first]
    assert wallet_of(alice).available == 1_800
    assert_ledger_consistent()

    assert _patch(api, job_id, gpus=4).status_code == 200  # 2,400: the old hold goes back
    first.refresh_from_db()
    assert (first.voided, first.closed_at is not None) == (1_200, True)
    (held,) = Hold.objects.filter(job_id=job_id, closed_at__isnull=True)
    assert held.amount == 2_400 and wallet_of(alice).available == 600
    assert api.get(f"/api/v1/jobs/{job_id}").json()["credits"]["held"] == 2_400
    assert_ledger_consistent()


def test_urgency_moves_a_job_ahead_of_its_users_own_and_holds_nothing_anew(api, alice,
                                                                           priced):
    from credits.models import Transfer

    credits_grant(organization=alice, amount=10_000)
    make_node("h", gpus=1)
    first, second, third = (_submit(api, time_limit_s=600) for _ in range(3))
    transfers = Transfer.objects.count()
    assert _patch(api, third, urgency_s=3600).json()["urgency_s"] == 3600
    assert Transfer.objects.count() == transfers  # its cost did not change
    scheduler_tick_run()
    assert Job.objects.get(pk=third).state == "SCHEDULED"
    assert {Job.objects.get(pk=j).state for j in (first, second)} == {"QUEUED"}


def test_a_round_that_read_the_old_request_places_nothing_by_it(api):
    from jobs import policy as P
    from jobs.scheduler.apply import apply_decisions
    from jobs.scheduler.snapshot import load_snapshot

    make_node("h", gpus=4)
    job_id = _submit(api, gpus=4)
    now = timezone.now()
    decisions = P.decide(load_snapshot(now))  # places it on the H100 node
    assert [p.job_id for p in decisions.placements] == [job_id]
    assert _patch(api, job_id, gpu_types=["A100"]).status_code == 200
    report = apply_decisions(decisions, now)
    assert (report.placed, report.refused) == (0, 1)
    assert Job.objects.get(pk=job_id).state == "QUEUED"
    assert not GpuBinding.objects.exists()


def test_changes_racing_the_rounds_never_bind_what_the_job_no_longer_asks_for(api, alice):
    """Each round either places a job by the request it holds when bound, or nothing; each
    change is made or refused with a 409, never a 500 or a deadlock."""
    make_node("h", gpus=8)
    make_node("a", gpus=8, gpu_type="A100")
    jobs = [_submit(api, gpus=4, gpu_types=["A100"]) for _ in range(6)]
    answers, turns = [], iter(range(4))

    def change_or_tick():
        if next(turns) % 2:
            scheduler_tick_run()
        else:
            client = APIClient()
            client.credentials(HTTP_AUTHORIZATION=f"Bearer {alice.raw_key}")
            for job_id in jobs:
                answers.append(_patch(client, job_id, gpu_types=["H100"], gpus=2).status_code)

    race(change_or_tick, 4)
    assert len(answers) == 12 and set(answers) <= {200, 409}
    scheduler_tick_run()
    for job in Job.objects.filter(pk__in=jobs):
        bound = GpuBinding.objects.filter(attempt__job=job).select_related("gpu__node")
        if job.state == "QUEUED":
            assert not bound.exists()
            continue
        assert len(bound) == job.gpus
        assert {b.gpu.node.gpu_type for b in bound} <= set(job.gpu_types)
