"""A running attempt's checkpoints are copied while its binary runs: the first it announces
in each window is linked in an instant and packed in a thread, links kept as links; a
heartbeat never waits on the copy, hands out what was copied even where the binary removed
its directory since, and records it, billing the work it keeps; what a killed agent left
beside a checkpoint goes before the next run (workers/agent/checkpoint_copies.py)."""

import os
import shutil
import tarfile
import threading
from datetime import timedelta

import pytest
from django.core.files.storage import default_storage
from django.utils import timezone

from jobs.models import Attempt, StoredCheckpoint
from tests.support.checkpoints import (
    files_of,
    rewrite_by_rename,
    start_placed,
    wait_until,
    write_checkpoint,
)
from workers.services.checkpoints import (
    MARKER,
    Taken,
    checkpoint_pack,
    checkpoint_unpack,
)

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def storage(settings):
    settings.GPUSCHED_STORE_CHECKPOINTS = True


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
