"""A GPU the node reads as unfit, or one a process left behind by an attempt still uses,
takes no new work until it is fit and free again; an attempt's binary is handed its GPUs by
the UUIDs the node registered."""

import pytest

from jobs.models import Attempt, GpuBinding
from jobs.scheduler.tick import scheduler_tick_run
from tests.support.factories import make_job, make_node
from workers.agent.discovery import configured_gpus
from workers.agent.gpu_watch import GpuReport
from workers.models import Gpu
from workers.services.attempts import AttemptResult, attempt_finish, attempt_start
from workers.services.nodes import GpuInfo, node_gpu_health, node_gpu_strays, node_register

pytestmark = pytest.mark.django_db(transaction=True)


def _uuids(node: str) -> list[str]:
    return list(Gpu.objects.filter(node__name=node).order_by("index").values_list("uuid",
                                                                                  flat=True))


def test_an_unfit_gpu_takes_no_work_and_returns_when_fit(alice):
    make_node("n1", gpus=2)
    first, second = _uuids("n1")
    assert node_gpu_health(name="n1", problems={first: "", second: "unreachable: GPU is lost"})
    gang, single = make_job(alice, gpus=2), make_job(alice, gpus=1)
    scheduler_tick_run()
    gang.refresh_from_db(), single.refresh_from_db()
    assert gang.state == "QUEUED" and single.state == "SCHEDULED"
    assert Attempt.objects.get(job=single).gpu_indices == [0]
    assert Gpu.objects.get(uuid=second).health_reason == "unreachable: GPU is lost"
    # a steady reading writes nothing; a fit one brings the GPU back
    assert node_gpu_health(name="n1", problems={second: "unreachable: GPU is lost"}) == 0
    assert node_gpu_health(name="n1", problems={second: ""}) == 1
    assert Gpu.objects.get(uuid=second).health == Gpu.Health.HEALTHY


def test_a_reading_touches_only_the_named_nodes_gpus(alice):
    make_node("n1", gpus=1)
    make_node("n2", gpus=1)
    (other,) = _uuids("n2")
    assert node_gpu_health(name="n1", problems={other: "unreachable"}) == 0
    assert Gpu.objects.get(uuid=other).health == Gpu.Health.HEALTHY


def test_registering_again_clears_old_problems_and_marks_lost_gpus(alice):
    make_node("n1", gpus=2)
    first, second = _uuids("n1")
    node_gpu_health(name="n1", problems={first: "row remapping pending: reset the GPU"})
    node_register(name="n1", gpu_type="H100", gpus=configured_gpus("n1", 1, 81920))
    assert Gpu.objects.get(uuid=first).health == Gpu.Health.HEALTHY
    assert Gpu.objects.get(uuid=first).health_reason == ""
    assert Gpu.objects.get(uuid=second).health_reason == "gone from the node"


def test_the_claim_carries_the_bound_gpus_uuids_in_index_order(alice):
    uuids = [f"GPU-{i:08x}-0000-0000-0000-000000000000" for i in range(4)]
    node_register(name="n1", gpu_type="H100",
                  gpus=[GpuInfo(i, u, 81920) for i, u in enumerate(uuids)])
    make_job(alice, gpus=1)
    make_job(alice, gpus=2)
    scheduler_tick_run()
    for attempt in Attempt.objects.all():
        claim = attempt_start(attempt_id=attempt.pk, token=attempt.token)
        assert claim.gpu_uuids == tuple(uuids[i] for i in claim.gpu_indices)


def test_a_process_an_attempt_left_behind_holds_its_gpu_until_it_ends(alice):
    make_node("n1", gpus=2)
    first, second = _uuids("n1")
    job = make_job(alice, gpus=2)
    scheduler_tick_run()
    attempt = Attempt.objects.get(job=job)
    claim = attempt_start(attempt_id=attempt.pk, token=attempt.token)
    # the agent finds a process on the first GPU after the binary's end, then reports the end
    assert node_gpu_strays(name="n1", strays={first: (4242,)}, attempt_id=claim.attempt_id)
    attempt_finish(attempt_id=attempt.pk, token=attempt.token,
                   result=AttemptResult("FAILED", 1, "boom", None, "exit_1"))
    assert not GpuBinding.objects.filter(released_at__isnull=True).exists()
    gang = make_job(alice, gpus=2)
    scheduler_tick_run()
    gang.refresh_from_db()
    assert gang.state == "QUEUED"
    # readings keep it out while the process lives, whatever else they find
    fit = {first: "", second: ""}
    assert node_gpu_health(name="n1", problems=fit, busy={first: (4242,)}) == 0
    assert Gpu.objects.get(uuid=first).health_reason.startswith(
        "in use by process 4242 that no attempt owns")
    assert node_gpu_health(name="n1", problems=fit, busy={}) == 1
    scheduler_tick_run()
    gang.refresh_from_db()
    assert gang.state == "SCHEDULED"


def test_a_busy_gpu_no_one_marked_is_left_to_its_attempt(alice):
    make_node("n1", gpus=1)
    (only,) = _uuids("n1")
    assert node_gpu_health(name="n1", problems={only: ""}, busy={only: (7,)}) == 0
    assert Gpu.objects.get(uuid=only).health == Gpu.Health.HEALTHY


def test_a_fenced_off_attempt_does_not_mark_the_gpus_its_successor_runs_on(alice, settings):
    settings.GPUSCHED_RETRY_BACKOFF_S = 0
    make_node("n1", gpus=1)
    (only,) = _uuids("n1")
    job = make_job(alice)
    scheduler_tick_run()
    old = Attempt.objects.get(job=job)
    attempt_start(attempt_id=old.pk, token=old.token)
    Attempt.objects.filter(pk=old.pk).update(lease_expires_at="2000-01-01T00:00:00Z")
    scheduler_tick_run()  # reaps it, then places the job again on the same GPU
    assert Attempt.objects.get(job=job, ended_at__isnull=True).pk != old.pk
    # the old binary, killed at last, finds the successor's process on the GPU
    assert node_gpu_strays(name="n1", strays={only: (99,)}, attempt_id=old.pk) == 0
    assert Gpu.objects.get(uuid=only).health == Gpu.Health.HEALTHY


def test_processes_found_as_the_agent_starts_are_strays_whatever_was_bound(alice):
    make_node("n1", gpus=2)
    first, second = _uuids("n1")
    make_job(alice, gpus=2)
    scheduler_tick_run()  # bound before the agent restarted; its binary's child lives on
    assert node_gpu_strays(name="n1", strays={first: (5,)}) == 1
    assert Gpu.objects.get(uuid=first).health_reason.startswith("in use by process 5")
    assert Gpu.objects.get(uuid=second).health == Gpu.Health.HEALTHY


def test_a_starting_agents_first_reading_is_recorded_with_its_registration(alice):
    make_node("n1", gpus=3)
    first, second, third = _uuids("n1")
    reading = GpuReport({first: "", second: "row remapping pending: reset the GPU", third: ""},
                        busy={third: (77,)})
    node_register(name="n1", gpu_type="H100", gpus=configured_gpus("n1", 3, 81920),
                  reading=reading)
    health = dict(Gpu.objects.values_list("uuid", "health_reason"))
    assert health[first] == "" and health[second].startswith("row remapping pending")
    assert health[third].startswith("in use by process 77")


def test_an_operator_takes_a_gpu_out_and_only_an_operator_returns_it(alice, client):
    from django.contrib.auth.models import User

    make_node("n1", gpus=2)
    first, second = _uuids("n1")
    client.force_login(User.objects.create_superuser("olga", "o@example.com", "pw"))
    chosen = {"_selected_action": [Gpu.objects.get(uuid=first).pk]}
    client.post("/admin/workers/gpu/", {**chosen, "action": "take_out"})
    assert Gpu.objects.get(uuid=first).health_reason == "taken out of service by olga"
    # neither a fit reading, a leftover process nor the agent's restart clears the mark
    node_gpu_health(name="n1", problems={first: "", second: ""})
    node_gpu_strays(name="n1", strays={first: (3,)})
    node_register(name="n1", gpu_type="H100", gpus=configured_gpus("n1", 2, 81920))
    assert Gpu.objects.get(uuid=first).health == Gpu.Health.UNHEALTHY
    gang = make_job(alice, gpus=2)
    scheduler_tick_run()
    gang.refresh_from_db()
    assert gang.state == "QUEUED"
    client.post("/admin/workers/gpu/", {**chosen, "action": "return_to_service"})
    assert Gpu.objects.get(uuid=first).health == Gpu.Health.HEALTHY
    scheduler_tick_run()
    gang.refresh_from_db()
    assert gang.state == "SCHEDULED"
