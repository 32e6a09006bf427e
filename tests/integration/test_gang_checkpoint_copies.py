"""A gang's nodes copy their checkpoints while it runs: its work counts as kept, billed and
resumed from, only at a step every node copied (workers/services/checkpoint_cuts.py)."""

from collections.abc import Iterator
from dataclasses import replace
from datetime import timedelta
from functools import partial
from itertools import count

import pytest
from django.core.files.storage import default_storage
from django.db import transaction
from django.utils import timezone

from credits.models import GpuPrice
from credits.services.grants import credits_grant
from credits.services.pricing import cost
from jobs.models import Attempt, StoredCheckpoint
from tests.support.checkpoints import (
    files_of,
    start_placed,
    stop_gang,
    wait_until,
    write_checkpoint,
)
from tests.support.threads import race
from workers.agent.checkpoint_copies import RunningCopies, resume_from
from workers.agent.command import AttemptPaths
from workers.services.attempts import (
    AttemptClaim,
    attempt_heartbeat,
    attempt_start,
    copy_kept,
)
from workers.services.checkpoint_cuts import resume_copies
from workers.services.checkpoints import MARKER, Taken, checkpoint_pack, checkpoints_sweep
from workers.services.ranks import rank_heartbeat, rank_start

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def storage(settings):
    settings.GPUSCHED_STORE_CHECKPOINTS = True


@pytest.fixture
def gang(alice, tmp_path):
    """A gang on two 4-GPU nodes, running for 300 s, that pays by the hour."""
    GpuPrice.objects.create(gpu_type="H100", credits_per_gpu_hour=3600)
    credits_grant(organization=alice, amount=1_000_000)
    attempt, _ = start_placed(alice, gpus=8)
    rank_start(attempt_id=attempt.pk, token=attempt.token, rank=1)
    started = timezone.now() - timedelta(seconds=300)
    Attempt.objects.filter(pk=attempt.pk).update(started_at=started)
    attempt.refresh_from_db()
    return attempt


def _copy(gang: Attempt, rank: int, step: int, after_s: float, tmp_path) -> Taken:
    """What a node's heartbeat reports: its share of `step`, taken `after_s` into the run."""
    directory = write_checkpoint(tmp_path / f"r{rank}-s{step}", step=step)
    name = checkpoint_pack(gang.job_id, gang.pk, rank, directory)
    return Taken(name, gang.started_at + timedelta(seconds=after_s), step)


def _beat(gang: Attempt, rank: int, copy: Taken) -> str:
    if rank:
        return rank_heartbeat(attempt_id=gang.pk, token=gang.token, rank=rank,
                              copied=copy).action
    return attempt_heartbeat(attempt_id=gang.pk, token=gang.token, copied=copy).action


def _kept(gang: Attempt) -> tuple[float | None, int]:
    """How far into the run the work is kept, and the credits posted for it."""
    gang.refresh_from_db()
    at = gang.last_checkpoint_at
    return (at - gang.started_at).total_seconds() if at else None, gang.credits_metered


def test_work_is_kept_once_every_node_copied_one_step(gang, tmp_path):
    step_10 = {0: _copy(gang, 0, 10, 100, tmp_path), 1: _copy(gang, 1, 10, 105, tmp_path)}
    assert _beat(gang, 0, step_10[0]) == "continue"
    assert _kept(gang) == (None, 0)  # rank 1's share of step 10 is on its node only
    _beat(gang, 1, _copy(gang, 1, 20, 190, tmp_path))
    assert _kept(gang) == (None, 0)  # two steps, each on one node: no resume
    assert resume_copies(gang.job_id, nodes=2) == {}
    _beat(gang, 1, step_10[1])
    # kept from the earlier node's moment: the step was whole by then on both
    assert _kept(gang) == (100, cost(gang.credits_per_hour, 100))
    assert resume_copies(gang.job_id, nodes=2) == {r: c.name for r, c in step_10.items()}
    _beat(gang, 0, _copy(gang, 0, 20, 200, tmp_path))
    assert _kept(gang) == (190, cost(gang.credits_per_hour, 190))


def test_a_stale_node_records_no_copy(gang, tmp_path):
    copy = _copy(gang, 1, 10, 100, tmp_path)
    assert rank_heartbeat(attempt_id=gang.pk, token=gang.token + 1, rank=1,
                          copied=copy).action == "stale"
    assert not StoredCheckpoint.objects.exists()


def test_a_copy_that_completes_a_step_after_the_attempt_ended_bills_nothing(gang, tmp_path):
    _beat(gang, 0, _copy(gang, 0, 10, 100, tmp_path))
    # the try's end (the reaper, a failing node) commits after rank 1's heartbeat checked
    # its own row live, before it locks the attempt to record its copy
    Attempt.objects.filter(pk=gang.pk).update(ended_at=timezone.now())
    with transaction.atomic():
        assert not copy_kept(gang.pk, 1, _copy(gang, 1, 10, 105, tmp_path))
    assert _kept(gang) == (None, 0) and not StoredCheckpoint.objects.filter(rank=1).exists()


def test_a_node_keeps_its_last_steps_and_the_step_every_node_copied(gang, tmp_path):
    _beat(gang, 0, _copy(gang, 0, 10, 100, tmp_path))
    names = {step: _copy(gang, 1, step, step * 10, tmp_path) for step in (10, 20, 30, 40, 50)}
    for copy in names.values():
        _beat(gang, 1, copy)
    rank_1 = set(StoredCheckpoint.objects.filter(rank=1).values_list("step", flat=True))
    assert rank_1 == {10, 30, 40, 50}  # 20 went: neither whole nor among the last three
    assert not default_storage.exists(names[20].name)
    _beat(gang, 0, _copy(gang, 0, 50, 500, tmp_path))
    assert _kept(gang)[0] == 500
    _beat(gang, 1, _copy(gang, 1, 60, 600, tmp_path))
    assert set(StoredCheckpoint.objects.filter(rank=1).values_list("step", flat=True)) == {
        40, 50, 60}
    # the sweep keeps the resume's step and what may complete a later one
    assert checkpoints_sweep() == 2  # rank 0's step 10, rank 1's 40
    assert sorted(StoredCheckpoint.objects.values_list("rank", "step")) == [
        (0, 50), (1, 50), (1, 60)]


def test_a_gang_whose_stop_copies_are_not_all_stored_resumes_from_and_pays_its_whole_step(
        gang, tmp_path):
    for rank in (0, 1):
        _beat(gang, rank, _copy(gang, rank, 10, 100, tmp_path))
    # at the stop rank 0 stores its checkpoint, rank 1's node cannot
    at_stop = checkpoint_pack(gang.job_id, gang.pk, 0, write_checkpoint(tmp_path / "s", 12))
    stop_gang(gang, {0: at_stop})
    # it pays the work its step kept, not its whole run: its stop copy is half a checkpoint
    assert _kept(gang) == (100, cost(gang.credits_per_hour, 100))
    again = Attempt.objects.get(job=gang.job_id, ended_at__isnull=True)
    resumed = attempt_start(attempt_id=again.pk, token=again.token).checkpoint
    assert resumed != at_stop and StoredCheckpoint.objects.get(name=resumed).step == 10
    assert rank_start(attempt_id=again.pk, token=again.token, rank=1).checkpoint == (
        StoredCheckpoint.objects.get(rank=1, step=10).name)


def _stopped_at(gang: Attempt, steps: dict[int, int], tmp_path) -> dict[int, str]:
    """Stop the gang, its nodes storing the checkpoints they wrote at `steps`; their names."""
    names = {r: checkpoint_pack(gang.job_id, gang.pk, r, write_checkpoint(
        tmp_path / f"stop-{r}", step)) for r, step in steps.items()}
    stop_gang(gang, names, steps)
    return names


def _resumed(gang: Attempt) -> list[str]:
    again = Attempt.objects.get(job=gang.job_id, ended_at__isnull=True)
    return [attempt_start(attempt_id=again.pk, token=again.token).checkpoint,
            rank_start(attempt_id=again.pk, token=again.token, rank=1).checkpoint]


def test_a_gang_whose_stop_copies_are_of_different_steps_resumes_from_its_whole_step(
        gang, tmp_path):
    for rank in (0, 1):
        _beat(gang, rank, _copy(gang, rank, 10, 100, tmp_path))
    _stopped_at(gang, {0: 12, 1: 13}, tmp_path)  # ranks that did not agree where to stop
    assert _kept(gang) == (100, cost(gang.credits_per_hour, 100))
    assert _resumed(gang) == list(StoredCheckpoint.objects.filter(step=10).order_by(
        "rank").values_list("name", flat=True))


def test_a_gang_whose_stop_copies_are_of_one_step_resumes_from_them_and_pays_its_run(
        gang, tmp_path):
    for rank in (0, 1):
        _beat(gang, rank, _copy(gang, rank, 10, 100, tmp_path))
    # stopped right after it copied step 10: the stop copies are of that step too
    names = _stopped_at(gang, {0: 10, 1: 10}, tmp_path)
    gang.refresh_from_db()
    assert _kept(gang) == ((gang.ended_at - gang.started_at).total_seconds(),
                           cost(gang.credits_per_hour, (gang.ended_at - gang.started_at
                                                        ).total_seconds()))
    assert _resumed(gang) == [names[0], names[1]]
    assert StoredCheckpoint.objects.filter(step=10).count() == 4


def test_a_gang_with_no_cut_starts_afresh_where_a_node_holds_an_old_checkpoint(tmp_path):
    claim = AttemptClaim(attempt_id=9, token=1, job_id=7, node="n2", gpu_indices=(0,),
                         gpu_uuids=("",), prompt="x", params={}, time_limit_s=60,
                         node_rank=1, nodes=("n1", "n2"))
    paths = AttemptPaths.under(tmp_path, job_id=7, attempt_id=9, suffix=".y4m", rank=1)
    write_checkpoint(paths.checkpoint_dir, step=3)  # its share of an earlier attempt's step
    resume_from(claim, paths)
    assert files_of(paths.checkpoint_dir) == {}  # else it alone would resume, at step 3
    # a job on one node keeps what its node holds: the latest state it had there
    alone = AttemptPaths.under(tmp_path, job_id=7, attempt_id=9, suffix=".y4m")
    write_checkpoint(alone.checkpoint_dir, step=3)
    resume_from(replace(claim, node_rank=0, nodes=("n1",)), alone)
    assert files_of(alone.checkpoint_dir) != {}


def test_a_gang_node_copies_only_steps_and_marks_no_directory_while_it_runs(tmp_path):
    directory = write_checkpoint(tmp_path / "job-8" / "checkpoint-rank-1", step=4)
    (directory / MARKER).write_text("checkpoints/job-8-attempt-1-rank-1.tar")
    copies = RunningCopies(8, 80, 1, directory, every_s=0, gang=True)
    copies.announce(None)  # a checkpoint without its step: no copy a gang could match
    assert copies.poll() is None and copies._copy is None
    assert not (directory / MARKER).exists()  # it holds another state than the copy now
    copies.announce(4)
    copies.poll()
    found: list = []
    wait_until(lambda: found.append(copies.poll()) or found[-1] is not None)
    assert found[-1].step == 4 and "-rank-1" in found[-1].name
    assert not (directory / MARKER).exists()  # its peers may resume from an earlier step
    copies.close()


def test_nodes_that_record_one_step_at_once_keep_it_once(gang, tmp_path):
    """Without the attempt's row locked each might see the other's copy missing, and the
    step would never count; or both might see it whole and post twice."""
    for step in (10, 20, 30):
        copies = {r: _copy(gang, r, step, step * 10 + r, tmp_path) for r in (0, 1)}
        race(partial(_beat_next, gang, count(), copies), 2)
        assert _kept(gang) == (step * 10, cost(gang.credits_per_hour, step * 10))


def _beat_next(gang: Attempt, ranks: Iterator[int], copies: dict[int, Taken]) -> None:
    """The next rank's heartbeat with its copy (each racing thread takes one rank)."""
    rank = next(ranks)
    assert _beat(gang, rank, copies[rank]) == "continue"

