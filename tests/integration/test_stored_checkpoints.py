"""A stopped attempt's checkpoints travel with its job: each node's copy is stored under the
attempt's fencing token, handed to the same rank of the next attempt, and swept once no
resume will read it (workers/services/checkpoints.py)."""

import io
import os
import shutil
import tarfile
import threading
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
    rewrite_by_rename,
    start_placed,
    stop_gang,
    wait_until,
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
    MARKER,
    Taken,
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


def test_a_running_attempt_copies_the_checkpoint_it_announces_once_a_window(tmp_path):
    from workers.agent.checkpoint_copies import RunningCopies

    directory = write_checkpoint(tmp_path / "job-7" / "checkpoint", step=3)
    copies = RunningCopies(7, 70, 0, directory, every_s=0, gang=False)
    assert copies.poll() is None  # nothing announced, nothing copied
    copies.announce(3)  # linked as it is announced
    rewrite_by_rename(directory, step=4)  # the binary's next one, written by rename, is not copied
    assert copies.poll() is None  # copying
    found: list = []
    wait_until(lambda: found.append(copies.poll()) or found[-1] is not None)
    taken = found[-1]
    there = tmp_path / "elsewhere"
    assert checkpoint_unpack(taken.name, there) and taken.step == 3
    assert files_of(there) == files_of(write_checkpoint(tmp_path / "three", step=3))
    assert (directory / MARKER).read_text() == taken.name  # holds that copy or a later state
    assert sorted(p.name for p in directory.parent.iterdir()) == [
        "checkpoint", "fresh"]  # no links left
    # the next checkpoint waits for the clock's next window; one in flight at the end is dropped
    slow = RunningCopies(7, 71, 0, directory, every_s=1e9, gang=False)
    slow.announce(5)
    assert slow.poll() is None
    wait_until(lambda: slow._copy.done())
    copied = slow._copy.result().name
    slow.announce(6)  # the same window: not linked
    assert slow.poll() is not None and slow._copy is None
    slow.close()
    assert default_storage.exists(copied)  # it was handed out before the end: kept
    closing = RunningCopies(7, 72, 0, directory, every_s=0, gang=False)
    closing.announce(7)
    closing.poll()
    in_flight = closing._copy
    closing.announce(8)  # linked, waiting for the copy in flight
    closing.close()
    closing.announce(9)  # a line read after the end links nothing
    assert not default_storage.exists(in_flight.result().name)
    assert (directory / MARKER).read_text() == copied  # the dropped copy is no one's
    assert sorted(p.name for p in directory.parent.iterdir()) == ["checkpoint", "fresh"]
    copies.close()


def _copied(copies) -> Taken:
    """The next copy `copies` finishes, polled as heartbeats do."""
    found: list = []
    wait_until(lambda: found.append(copies.poll()) or found[-1] is not None)
    return found[-1]


def test_a_running_copy_keeps_links_as_links_as_the_copy_of_a_stop_does(tmp_path):
    """Followed, `loop -> .` leads round and round and `root -> /` over the whole disk."""
    from workers.agent.checkpoint_copies import RunningCopies

    directory = write_checkpoint(tmp_path / "job-7" / "checkpoint", step=3)
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "elsewhere" / "big.bin").write_bytes(b"not the checkpoint's")
    for name, target in (("loop", "."), ("latest", "shards/0.bin"),
                         ("outside", str(tmp_path / "elsewhere"))):
        (directory / name).symlink_to(target)
    copies = RunningCopies(7, 70, 0, directory, every_s=0, gang=False)
    copies.announce(3)
    taken = _copied(copies)
    copies.close()
    with default_storage.open(taken.name) as fh, tarfile.open(fileobj=fh) as tar:
        members = {m.name: m for m in tar.getmembers()}
    stop = checkpoint_pack(7, 70, 0, directory)
    with default_storage.open(stop) as fh, tarfile.open(fileobj=fh) as tar:
        assert sorted(m.name for m in tar.getmembers()) == sorted(members)  # the same
    assert {n: m.linkname for n, m in members.items() if m.issym()} == {
        "loop": ".", "latest": "shards/0.bin", "outside": str(tmp_path / "elsewhere")}
    assert sorted(members) == ["latest", "loop", "outside", "shards", "shards/0.bin",
                               "state.json"]


def test_a_heartbeat_does_not_wait_for_a_checkpoint_being_linked(tmp_path, monkeypatch):
    """Its poll() waiting on the file system would stop supervision: no lease renewed, no
    time limit, no kill."""
    from workers.agent.checkpoint_copies import RunningCopies

    directory = write_checkpoint(tmp_path / "job-7" / "checkpoint", step=3)
    copies = RunningCopies(7, 70, 0, directory, every_s=0, gang=False)
    linking, go_on, link = threading.Event(), threading.Event(), os.link

    def slow_link(src, dst, **kw):  # a checkpoint of many files, on a slow disk
        linking.set()
        go_on.wait(10)
        link(src, dst, **kw)

    monkeypatch.setattr(os, "link", slow_link)
    announcing = threading.Thread(target=copies.announce, args=(3,))
    announcing.start()
    assert linking.wait(5)
    polling = threading.Thread(target=copies.poll)
    polling.start()
    polling.join(timeout=2)
    try:
        assert not polling.is_alive()
    finally:
        go_on.set()
        announcing.join(5)
        polling.join(5)
    assert _copied(copies).step == 3  # linked meanwhile: copied at the next polls
    copies.close()


def test_a_copy_of_a_directory_the_binary_removed_is_still_handed_out(tmp_path):
    """Its marker cannot be written there; the copy it took is whole all the same."""
    from workers.agent.checkpoint_copies import RunningCopies

    directory = write_checkpoint(tmp_path / "job-7" / "checkpoint", step=3)
    copies = RunningCopies(7, 70, 0, directory, every_s=0, gang=False)
    copies.announce(3)
    assert copies.poll() is None  # copying
    wait_until(lambda: copies._copy.done())
    shutil.rmtree(directory)
    taken = copies.poll()
    assert taken is not None and taken.step == 3 and default_storage.exists(taken.name)
    assert not directory.exists()
    copies.close()


def test_a_copy_storage_will_not_delete_is_left_to_the_sweep(monkeypatch):
    """Dropping a copy is no reason to stop: the sweep deletes it once its job ends."""
    from workers.agent.runner import _newest

    class Refusing:
        def delete(self, name: str) -> None:
            raise OSError("storage refused")

    monkeypatch.setattr("workers.services.checkpoints.default_storage", Refusing())
    unsent, polled = (Taken(f"checkpoints/job-7-{n}.tar", timezone.now()) for n in "ab")
    assert _newest(unsent, polled) == polled


def test_a_heartbeat_with_a_copy_records_it_and_bills_up_to_when_it_was_taken(alice, tmp_path):
    from credits.models import GpuPrice
    from credits.services.grants import credits_grant
    from credits.services.pricing import cost
    from workers.services.attempts import attempt_heartbeat

    GpuPrice.objects.create(gpu_type="H100", credits_per_gpu_hour=3600)
    credits_grant(organization=alice, amount=100_000)
    attempt, _ = start_placed(alice)
    started = timezone.now() - timedelta(seconds=300)
    Attempt.objects.filter(pk=attempt.pk).update(started_at=started)
    names = [checkpoint_pack(attempt.job_id, attempt.pk, 0,
                             write_checkpoint(tmp_path / f"c{i}", i + 1)) for i in (0, 1)]
    taken = started + timedelta(seconds=100)
    verdict = attempt_heartbeat(attempt_id=attempt.pk, token=attempt.token,
                                copied=Taken(names[0], taken))
    assert verdict.action == "continue"
    attempt.refresh_from_db()
    assert attempt.last_checkpoint_at == taken and attempt.credits_metered == cost(
        attempt.credits_per_hour, 100)
    assert StoredCheckpoint.objects.get(attempt=attempt).name == names[0]
    # the next copy replaces it, and its file goes
    attempt_heartbeat(attempt_id=attempt.pk, token=attempt.token,
                      copied=Taken(names[1], taken + timedelta(seconds=100)))
    assert StoredCheckpoint.objects.get(attempt=attempt).name == names[1]
    assert not default_storage.exists(names[0]) and default_storage.exists(names[1])
    # a stale heartbeat records nothing
    stale = attempt_heartbeat(attempt_id=attempt.pk, token=attempt.token + 1,
                              copied=Taken("checkpoints/job-0-x.tar", taken))
    assert stale.action == "stale" and StoredCheckpoint.objects.count() == 1


def test_what_a_killed_agent_left_beside_a_checkpoint_goes_before_the_next_run(tmp_path):
    from workers.agent.checkpoint_copies import clear_leftovers

    directory = write_checkpoint(tmp_path / "job-7" / "checkpoint", step=3)
    for left in (".checkpoint-copy-4", ".checkpoint-copy-12"):  # links a copy was reading
        write_checkpoint(tmp_path / "job-7" / left, step=2)
    (tmp_path / "job-7" / ".checkpoint.tar").write_bytes(b"half a tar")
    ranks = write_checkpoint(tmp_path / "job-7" / "checkpoint-rank-1", step=3)  # another's
    clear_leftovers(directory)
    assert sorted(p.name for p in directory.parent.iterdir()) == [
        "checkpoint", "checkpoint-rank-1"]
    assert files_of(directory) == files_of(ranks)  # the checkpoints themselves stay
