"""A node where the attempts of several jobs fail in a row, while others run jobs to their
end, is cordoned before it spends every job's retries; one poison job, a success between,
a failure everywhere, or failures that are the job's own (an OOM, a bad input) cordon
nothing. A gang's failure is its failing node's."""

import pytest

from jobs.models import Attempt, Job
from jobs.scheduler.tick import scheduler_tick_run
from jobs.services.submission import JobSpec, job_submit
from tests.support.factories import make_node, start_placed
from workers.models import Node
from workers.services.attempts import AttemptResult, attempt_finish, attempt_start
from workers.services.fleet import node_return_to_service
from workers.services.ranks import rank_finish, rank_start
from workers.services.reaper import release_due_retries

pytestmark = pytest.mark.django_db(transaction=True)

CRASH = AttemptResult("FAILED", 1, "Xid 79: GPU has fallen off the bus", None, "exit_1")
OK = AttemptResult("SUCCEEDED", 0)


@pytest.fixture(autouse=True)
def fleet(settings):
    settings.GPUSCHED_CORDON_AFTER_FAILURES = 3
    settings.GPUSCHED_MAX_RETRIES = 3
    settings.GPUSCHED_RETRY_BACKOFF_S = 3600  # a failed job waits: it does not run again here
    make_node("bad", gpus=1, gpu_type="H100")
    make_node("good", gpus=1, gpu_type="A100")


def _run(org, gpu_type: str, result: AttemptResult, job: Job | None = None) -> Job:
    """Run a job (a new one on `gpu_type`, or `job` again) to `result`."""
    job = job or job_submit(organization=org, spec=JobSpec(prompt="x", gpus=1,
                                                           gpu_types=[gpu_type]))
    if job.state == "RETRY_WAIT":
        release_due_retries(now=job.retry_at)
    attempt = start_placed(job)
    return attempt_finish(attempt_id=attempt.pk, token=attempt.token, result=result)


def _state(name: str) -> tuple[str, str]:
    node = Node.objects.get(name=name)
    return node.state, node.state_reason


def test_a_node_that_fails_three_jobs_in_a_row_is_cordoned_and_returns_clean(alice, client):
    failed = [_run(alice, "H100", CRASH)]
    _run(alice, "A100", OK)  # the others are fine meanwhile
    failed += [_run(alice, "H100", CRASH) for _ in range(2)]
    state, reason = _state("bad")
    assert state == "CORDONED"
    assert reason == (f"the attempts of 3 jobs failed in a row here (jobs "
                      f"{', '.join(str(j.pk) for j in failed)})")
    assert _state("good") == ("ACTIVE", "")
    assert "gpusched_nodes_cordoned_for_failures 1.0" in client.get("/metrics").content.decode()
    assert set(Attempt.objects.filter(job__in=failed).values_list("failed_on__name",
                                                                  flat=True)) == {"bad"}
    node_return_to_service(Node.objects.get(name="bad"))
    assert _state("bad") == ("ACTIVE", "")


def test_one_poison_job_failing_again_and_again_cordons_nothing(alice):
    job = _run(alice, "H100", CRASH)
    _run(alice, "A100", OK)
    for _ in range(3):
        job = _run(alice, "H100", CRASH, job)
    assert job.state == "DEAD" and _state("bad")[0] == "ACTIVE"


def test_a_job_run_to_its_end_between_the_failures_clears_the_node(alice):
    _run(alice, "H100", CRASH)
    _run(alice, "A100", OK)
    _run(alice, "H100", CRASH)
    _run(alice, "H100", OK)
    _run(alice, "H100", CRASH)
    _run(alice, "A100", OK)
    _run(alice, "H100", CRASH)
    assert _state("bad")[0] == "ACTIVE"
    _run(alice, "H100", CRASH)
    assert _state("bad")[0] == "CORDONED"


def test_failures_everywhere_are_not_the_nodes_fault(alice):
    for _ in range(3):
        _run(alice, "H100", CRASH)
        _run(alice, "A100", CRASH)
    assert _state("bad")[0] == _state("good")[0] == "ACTIVE"


@pytest.mark.parametrize("result", [
    AttemptResult("OOM", 137, "CUDA out of memory", None, "out_of_memory"),
    AttemptResult("FAILED", 2, "usage: bad", None, "exit_2"),
])
def test_a_failure_that_is_the_jobs_own_does_not_count(alice, result):
    _run(alice, "H100", result)
    _run(alice, "A100", OK)
    for _ in range(2):
        _run(alice, "H100", result)
    assert _state("bad")[0] == "ACTIVE"


def test_the_setting_at_zero_cordons_nothing(alice, settings):
    settings.GPUSCHED_CORDON_AFTER_FAILURES = 0
    _run(alice, "H100", CRASH)
    _run(alice, "A100", OK)
    for _ in range(3):
        _run(alice, "H100", CRASH)
    assert _state("bad")[0] == "ACTIVE"


def test_a_gang_that_fails_on_its_second_node_counts_against_that_node(alice):
    for name in ("g1", "g2"):
        make_node(name, gpus=1, gpu_type="L40", island="i1")
    for i in range(3):
        job = job_submit(organization=alice, spec=JobSpec(prompt="x", gpus=2,
                                                          gpu_types=["L40"]))
        scheduler_tick_run()
        gang = Attempt.objects.get(job=job)
        rank = gang.ranks.get()
        attempt_start(attempt_id=gang.pk, token=gang.token)
        rank_start(attempt_id=gang.pk, token=gang.token, rank=1)
        rank_finish(attempt_id=gang.pk, token=gang.token, rank=1, result=CRASH)
        if i == 0:
            _run(alice, "A100", OK)
    gangs = Attempt.objects.filter(ranks__isnull=False)
    assert set(gangs.values_list("failed_on_id", flat=True)) == {rank.node_id}
    assert Node.objects.get(pk=rank.node_id).state == "CORDONED"
    assert Node.objects.get(pk=gang.node_id).state == "ACTIVE"


def test_failures_of_jobs_being_stopped_do_not_count(alice):
    """A worker stopped with a SIGTERM to its whole group: its binaries stop before they are
    asked, and their exits read as crashes; the node is not at fault."""
    from jobs.services.requeue import attempt_stop_and_requeue

    _run(alice, "H100", CRASH)
    _run(alice, "A100", OK)
    for _ in range(2):
        job = job_submit(organization=alice, spec=JobSpec(prompt="x", gpus=1,
                                                          gpu_types=["H100"]))
        attempt = start_placed(job)
        attempt_stop_and_requeue(attempt, reason="its worker is stopping")
        attempt_finish(attempt_id=attempt.pk, token=attempt.token, result=AttemptResult(
            "FAILED", 75, "", None, "exit_75"))
    assert _state("bad")[0] == "ACTIVE"
    _run(alice, "H100", CRASH)
    _run(alice, "H100", CRASH)
    assert _state("bad")[0] == "CORDONED"  # the crashes on either side still count


def _crash_on(org, gpus: int = 1) -> Attempt:
    job = job_submit(organization=org, spec=JobSpec(prompt="x", gpus=gpus, gpu_types=["L40"]))
    attempt = start_placed(job)
    attempt_finish(attempt_id=attempt.pk, token=attempt.token, result=CRASH)
    return attempt


def test_failures_on_one_gpu_take_that_gpu_out_and_then_the_node(alice):
    from workers.models import Gpu

    node = make_node("wide", gpus=2, gpu_type="L40")
    assert _crash_on(alice).gpu_indices == [0]  # the lowest free GPU, as for the next two
    _run(alice, "A100", OK)
    for _ in range(2):
        _crash_on(alice)
    gpus = {g.index: (g.health, g.health_reason) for g in Gpu.objects.filter(node=node)}
    assert gpus[0][0] == "UNHEALTHY" and gpus[0][1].startswith(
        "taken out of service by the scheduler: the attempts of 3 jobs failed in a row here")
    assert gpus[1] == ("HEALTHY", "") and _state("wide") == ("ACTIVE", "")
    from workers.services.nodes import node_gpu_health

    node_gpu_health(name="wide", problems={g.uuid: "" for g in Gpu.objects.filter(node=node)})
    assert Gpu.objects.get(node=node, index=0).health == "UNHEALTHY"  # a reading keeps it
    _run(alice, "A100", OK)
    assert _crash_on(alice).gpu_indices == [1]  # the fault outlived the GPU: the node's
    assert _state("wide")[0] == "CORDONED"


def test_failures_across_every_gpu_of_a_node_cordon_it(alice):
    make_node("wide", gpus=2, gpu_type="L40")
    _crash_on(alice, gpus=2)
    _run(alice, "A100", OK)
    for _ in range(2):
        _crash_on(alice, gpus=2)
    assert _state("wide")[0] == "CORDONED"
