"""A stopped attempt's checkpoints travel with its job: each node's copy is stored under the
attempt's fencing token, handed to the same rank of the next attempt, and swept once no
resume will read it (workers/services/checkpoints.py)."""

import io
import tarfile
from datetime import timedelta

import pytest
from django.core.files.base import ContentFile
from django.core.files.storage import default_storage
from django.utils import timezone

from jobs.models import Attempt, GpuBinding, Job, StoredCheckpoint
from jobs.scheduler.tick import scheduler_tick_run
from jobs.services.cancellation import job_cancel
from jobs.services.requeue import attempt_stop_and_requeue
from tests.support.checkpoints import (
    files_of,
    start_placed,
    stop_gang,
    write_checkpoint,
)
from tests.support.factories import make_job, make_node
from tests.support.storage import AwayStorage, StubbornStorage
from workers.services.attempts import (
    AttemptResult,
    StaleAttempt,
    attempt_finish,
    attempt_free_gpus,
    attempt_start,
)
from workers.services.checkpoint_cuts import resume_copies
from workers.services.checkpoints import (
    checkpoint_pack,
    checkpoint_unpack,
    checkpoints_sweep,
)
from workers.services.ranks import rank_finish, rank_start
from workers.services.reaper import reap_expired_attempts

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def storage(settings):
    settings.GPUSCHED_STORE_CHECKPOINTS = True


@pytest.fixture(params=["local", "stream"])
def any_storage(request, settings):
    """File system storage, whose tars are unpacked by the kernel, or one read as a stream
    (object storage's way: no local path)."""
    if request.param == "stream":
        settings.STORAGES = {**settings.STORAGES, "default": {
            "BACKEND": "django.core.files.storage.InMemoryStorage"}}
    return request.param


def _tar(*members: tuple[tarfile.TarInfo, bytes]) -> str:
    """A tar of these members in storage; its name."""
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w") as tar:
        for member, data in members:
            member.size = len(data)
            tar.addfile(member, io.BytesIO(data))
    return default_storage.save("checkpoints/job-7-made.tar", ContentFile(out.getvalue()))


def test_a_copy_lands_whole_in_another_nodes_directory(tmp_path, any_storage):
    here = write_checkpoint(tmp_path / "n1" / "checkpoint", step=3)
    name = checkpoint_pack(7, 70, 0, here)
    assert name.startswith("checkpoints/job-7-attempt-70-rank-0") and default_storage.exists(name)
    assert [p.name for p in here.parent.iterdir()] == ["checkpoint"]  # no tar left behind
    there = tmp_path / "n2" / "checkpoint"
    (there / "old").mkdir(parents=True)
    (there / "old" / "stale.bin").write_bytes(b"an earlier attempt's")
    assert checkpoint_unpack(name, there)
    assert files_of(there) == files_of(here)  # and nothing of what was there before
    # a directory that holds the copy already, there or where it was made, copies nothing
    assert not checkpoint_unpack(name, there) and not checkpoint_unpack(name, here)


def test_nothing_is_stored_for_an_empty_directory_or_when_copying_is_off(tmp_path, settings):
    empty = tmp_path / "checkpoint"
    empty.mkdir()
    assert checkpoint_pack(7, 70, 0, empty) == ""
    assert checkpoint_pack(7, 70, 0, tmp_path / "missing") == ""
    settings.GPUSCHED_STORE_CHECKPOINTS = False
    assert checkpoint_pack(7, 70, 0, write_checkpoint(empty, step=1)) == ""


def test_a_copy_that_cannot_be_read_leaves_the_directory_empty(tmp_path, any_storage):
    there = write_checkpoint(tmp_path / "checkpoint", step=2)
    assert not checkpoint_unpack("checkpoints/job-7-gone.tar", there)
    assert files_of(there) == {}
    # a tar whose names reach outside the directory is refused whole
    name = _tar((tarfile.TarInfo("../escaped.txt"), b"outside"))
    assert not checkpoint_unpack(name, there)
    assert not (tmp_path / "escaped.txt").exists() and files_of(there) == {}
    # so is one that links outside, and one cut short inside a file
    link = tarfile.TarInfo("escape")
    link.type, link.linkname = tarfile.SYMTYPE, "/etc"
    assert not checkpoint_unpack(_tar((link, b"")), there) and files_of(there) == {}
    whole = default_storage.open(_tar((tarfile.TarInfo("big.bin"), bytes(4096)))).read()
    cut = default_storage.save("checkpoints/job-7-cut.tar", ContentFile(whole[:2048]))
    assert not checkpoint_unpack(cut, there) and files_of(there) == {}


@pytest.fixture
def away(settings):
    """Storage that does not answer for a while, read again every READ_RETRY_EVERY_S."""
    settings.STORAGES = {**settings.STORAGES, "default": {
        "BACKEND": "tests.support.storage.AwayStorage"}}
    AwayStorage.fails = AwayStorage.reads = 0
    return AwayStorage


def test_a_copy_storage_does_not_answer_for_is_read_again_till_it_does(tmp_path, away,
                                                                       settings):
    """Starting afresh would throw away the work the copy kept, which its job paid for."""
    name = checkpoint_pack(7, 70, 0, write_checkpoint(tmp_path / "n1" / "checkpoint", step=3))
    settings.GPUSCHED_CHECKPOINT_READ_RETRY_S = 60
    away.fails = 2
    there = tmp_path / "n2" / "checkpoint"
    assert checkpoint_unpack(name, there) and away.reads == 3
    assert files_of(there) == files_of(tmp_path / "n1" / "checkpoint")


def test_a_copy_gone_is_not_read_again_and_one_still_away_is_given_up(tmp_path, away,
                                                                     settings):
    settings.GPUSCHED_CHECKPOINT_READ_RETRY_S = 60
    there = write_checkpoint(tmp_path / "checkpoint", step=2)
    assert not checkpoint_unpack("checkpoints/job-7-gone.tar", there)
    assert away.reads == 1 and files_of(there) == {}
    name = checkpoint_pack(7, 70, 0, write_checkpoint(tmp_path / "n1" / "checkpoint", step=3))
    settings.GPUSCHED_CHECKPOINT_READ_RETRY_S = 0  # past its time: the binary starts afresh
    away.fails, away.reads = 5, 0
    assert not checkpoint_unpack(name, there)
    assert away.reads == 1 and files_of(there) == {}


def test_folders_and_links_inside_the_directory_are_put_back(tmp_path, any_storage):
    folder = tarfile.TarInfo("shards")
    folder.type, folder.mode = tarfile.DIRTYPE, 0o755
    link = tarfile.TarInfo("latest")
    link.type, link.linkname = tarfile.SYMTYPE, "shards/0.bin"
    there = tmp_path / "checkpoint"
    assert checkpoint_unpack(_tar((folder, b""), (tarfile.TarInfo("shards/0.bin"), b"w" * 99),
                                  (link, b"")), there)
    assert (there / "latest").is_symlink() and (there / "latest").read_bytes() == b"w" * 99


def _preempted(attempt: Attempt, checkpoint: str) -> Job:
    assert attempt_stop_and_requeue(attempt, reason="test", grace_s=30)
    return attempt_finish(attempt_id=attempt.pk, token=attempt.token,
                          result=AttemptResult("PREEMPTED", 75, checkpoint=checkpoint))


def test_the_next_attempt_is_handed_the_copy_its_predecessor_stored(alice, tmp_path):
    first, claim = start_placed(alice)
    assert claim.checkpoint == ""
    job = first.job
    name = checkpoint_pack(job.pk, first.pk, 0, write_checkpoint(tmp_path / "c", step=5))
    assert _preempted(first, name).state == "QUEUED"
    scheduler_tick_run()
    second = Attempt.objects.get(job=job, ended_at__isnull=True)
    assert attempt_start(attempt_id=second.pk, token=second.token).checkpoint == name


def test_a_fenced_off_attempt_stores_nothing(alice, tmp_path, settings):
    attempt, _ = start_placed(alice)
    job = attempt.job
    later = timezone.now() + timedelta(seconds=settings.GPUSCHED_LEASE_SECONDS + 1)
    assert reap_expired_attempts(now=later) == 1  # lost: its job retries under a new token
    name = checkpoint_pack(job.pk, attempt.pk, 0, write_checkpoint(tmp_path / "c", step=5))
    with pytest.raises(StaleAttempt):
        attempt_finish(attempt_id=attempt.pk, token=attempt.token,
                       result=AttemptResult("PREEMPTED", 75, checkpoint=name))
    assert not StoredCheckpoint.objects.exists()


def test_each_rank_of_a_gang_resumes_from_its_own_copy(alice, tmp_path):
    gang, _ = start_placed(alice, gpus=8)
    job = gang.job
    rank_start(attempt_id=gang.pk, token=gang.token, rank=1)
    names = [checkpoint_pack(job.pk, gang.pk, r, write_checkpoint(tmp_path / f"r{r}", step=r + 1))
             for r in (0, 1)]
    assert attempt_stop_and_requeue(gang, reason="test", grace_s=30)
    rank_finish(attempt_id=gang.pk, token=gang.token, rank=1,
                result=AttemptResult("PREEMPTED", 75, checkpoint=names[1]))
    attempt_finish(attempt_id=gang.pk, token=gang.token,
                   result=AttemptResult("PREEMPTED", 75, checkpoint=names[0]))
    scheduler_tick_run()
    again = Attempt.objects.get(job=job, ended_at__isnull=True)
    assert attempt_start(attempt_id=again.pk, token=again.token).checkpoint == names[0]
    assert rank_start(attempt_id=again.pk, token=again.token, rank=1).checkpoint == names[1]


def test_a_gang_never_resumes_from_copies_of_different_attempts(alice, tmp_path):
    first, _ = start_placed(alice, gpus=8)
    job = first.job
    kept = {r: checkpoint_pack(job.pk, first.pk, r, write_checkpoint(tmp_path / f"a{r}", step=5))
            for r in (0, 1)}
    stop_gang(first, kept)
    second = Attempt.objects.get(job=job, ended_at__isnull=True)
    attempt_start(attempt_id=second.pk, token=second.token)
    # rank 1's node could not store its share of the later step: rank 0's alone is no resume
    partial = checkpoint_pack(job.pk, second.pk, 0, write_checkpoint(tmp_path / "b0", step=9))
    stop_gang(second, {0: partial})
    third = Attempt.objects.get(job=job, ended_at__isnull=True)
    claims = [attempt_start(attempt_id=third.pk, token=third.token),
              rank_start(attempt_id=third.pk, token=third.token, rank=1)]
    assert [c.checkpoint for c in claims] == [kept[0], kept[1]]
    assert checkpoints_sweep() == 0  # the newer, partial set keeps nothing older from going
    assert StoredCheckpoint.objects.count() == 3


def test_a_job_placed_on_another_number_of_nodes_starts_afresh(alice, tmp_path):
    gang, _ = start_placed(alice, gpus=8)
    job = gang.job
    stop_gang(gang, {r: checkpoint_pack(job.pk, gang.pk, r,
                                            write_checkpoint(tmp_path / f"r{r}", step=5))
                         for r in (0, 1)})
    assert sorted(resume_copies(job.pk, nodes=2)) == [0, 1]
    assert resume_copies(job.pk, nodes=1) == {}  # half a gang's state is no checkpoint


def test_the_sweep_keeps_only_the_copies_a_resume_will_read(alice, tmp_path):
    make_node("n1", gpus=2)
    resuming, ended = make_job(alice, gpus=1), make_job(alice, gpus=1)
    names = {}
    for round_ in (1, 2):
        scheduler_tick_run()
        for job in (resuming, ended):
            attempt = Attempt.objects.get(job=job, ended_at__isnull=True)
            attempt_start(attempt_id=attempt.pk, token=attempt.token)
            directory = write_checkpoint(tmp_path / f"{job.pk}-{round_}", step=round_)
            names[job.pk, round_] = checkpoint_pack(job.pk, attempt.pk, 0, directory)
            _preempted(attempt, names[job.pk, round_])
    # copies stored by nodes that died before they reported: recorded nowhere
    unrecorded = [default_storage.save(f"checkpoints/job-{job.pk}-attempt-99-rank-0.tar",
                                       ContentFile(b"tar")) for job in (resuming, ended)]
    job_cancel(job=Job.objects.get(pk=ended.pk))
    assert checkpoints_sweep() == 4
    assert list(StoredCheckpoint.objects.values_list("name", flat=True)) == [
        names[resuming.pk, 2]]
    assert [default_storage.exists(n) for n in names.values()] == [False, False, True, False]
    # a live job's stays until the job ends: it cannot be told from a copy about to be recorded
    assert [default_storage.exists(n) for n in unrecorded] == [True, False]
    assert checkpoints_sweep() == 0


def test_a_copy_storage_will_not_delete_never_stops_the_sweep(alice, tmp_path, settings):
    settings.STORAGES = {**settings.STORAGES, "default": {
        "BACKEND": "tests.support.storage.StubbornStorage"}}
    make_node("n1", gpus=2)
    jobs = [make_job(alice, gpus=1) for _ in range(2)]
    scheduler_tick_run()
    names = []
    for job in jobs:
        attempt = Attempt.objects.get(job=job)
        attempt_start(attempt_id=attempt.pk, token=attempt.token)
        names.append(checkpoint_pack(job.pk, attempt.pk, 0, write_checkpoint(
            tmp_path / str(job.pk), step=1)))
        _preempted(attempt, names[-1])
        job_cancel(job=Job.objects.get(pk=job.pk))
    StubbornStorage.kept = {names[0]}
    try:
        assert checkpoints_sweep() == 2  # the second's copy, and both rows
        assert not StoredCheckpoint.objects.exists()
        assert [default_storage.exists(n) for n in names] == [True, False]
        assert checkpoints_sweep() == 0  # found again unrecorded, refused again: run on
        StubbornStorage.kept = set()
        assert checkpoints_sweep() == 1 and not default_storage.exists(names[0])
    finally:
        StubbornStorage.kept = set()


def test_the_lease_is_renewed_while_a_copy_is_made(alice, settings):
    """A large checkpoint may take longer to copy than a lease lasts."""
    import time

    from workers.agent.checkpoint_copies import keeping_the_lease

    settings.GPUSCHED_HEARTBEAT_SECONDS = 0.2
    attempt, claim = start_placed(alice, gpus=1)
    before = Attempt.objects.get(pk=attempt.pk).lease_expires_at
    assert keeping_the_lease(claim, lambda: time.sleep(1.0) or "copied") == "copied"
    assert Attempt.objects.get(pk=attempt.pk).lease_expires_at >= before + timedelta(seconds=0.6)


def test_a_node_removes_what_jobs_that_ended_left_in_its_work_root(alice, tmp_path):
    from workers.services.checkpoints import work_root_sweep

    running, _ = start_placed(alice)
    ended = make_job(alice)
    job_cancel(job=ended)
    for pk in (running.job_id, ended.pk, 99_999):  # the last one's job is gone
        write_checkpoint(tmp_path / f"job-{pk}" / "checkpoint", step=1)
    (tmp_path / "job-notes").mkdir()  # not a job's: left alone
    assert work_root_sweep(tmp_path) == 2
    assert sorted(p.name for p in tmp_path.iterdir()) == [f"job-{running.job_id}", "job-notes"]


def test_each_node_of_a_gang_frees_its_gpus_before_it_copies(alice, tmp_path):
    """The next round sees only the nodes still holding theirs; a stale token frees none."""
    from jobs.scheduler.snapshot import load_snapshot
    from workers.services.ranks import rank_free_gpus

    gang, _ = start_placed(alice, gpus=8)
    rank_start(attempt_id=gang.pk, token=gang.token, rank=1)
    assert attempt_stop_and_requeue(gang, reason="test", grace_s=30)

    def held() -> list[tuple[str, tuple[int, ...]]]:
        return sorted((a.node, a.gpus) for r in load_snapshot(timezone.now()).running
                      for a in r.allocations)

    assert not rank_free_gpus(attempt_id=gang.pk, token=gang.token + 1, rank=1)
    assert rank_free_gpus(attempt_id=gang.pk, token=gang.token, rank=1)
    assert held() == [("n1", (0, 1, 2, 3))]
    assert set(GpuBinding.objects.filter(released_at__isnull=True).values_list(
        "gpu__node__name", flat=True)) == {"n1"}
    assert not attempt_free_gpus(attempt_id=gang.pk, token=gang.token + 1)
    assert attempt_free_gpus(attempt_id=gang.pk, token=gang.token)
    assert held() == [] and not GpuBinding.objects.filter(released_at__isnull=True).exists()
    # the copies done, the reports come as before
    copies = [checkpoint_pack(gang.job_id, gang.pk, r, write_checkpoint(tmp_path / f"{r}", 3))
              for r in (0, 1)]
    rank_finish(attempt_id=gang.pk, token=gang.token, rank=1,
                result=AttemptResult("PREEMPTED", 75, checkpoint=copies[1]))
    job = attempt_finish(attempt_id=gang.pk, token=gang.token,
                         result=AttemptResult("PREEMPTED", 75, checkpoint=copies[0]))
    gang.refresh_from_db()
    assert job.state == "QUEUED" and gang.last_checkpoint_at == gang.gpus_freed_at
