"""How a node's agent carries checkpoints to and from storage (workers/services/checkpoints.py):
put the stored copy in place before the binary starts, copy while it runs, copy when it stops.

A node copies its checkpoint directory to storage while the binary runs, at most once a
window of `GPUSCHED_METER_INTERVAL_S` seconds of the clock and one copy at a time. As the
binary announces a whole checkpoint (`CHECKPOINT <path> [step=<n>]`, read in the thread
that reads its output), the directory's files are hard-linked into a sibling directory, in
an instant, so the copy reads that checkpoint while the binary writes the next: its files
are replaced by rename, never rewritten in place (docs/fakegen.md). A finished copy is what
the next heartbeat reports: on one node, the attempt's last checkpoint becomes the moment
its files were linked, and the credits of the work up to it are posted then, so billed work
is work a retry on any node resumes from. A gang's nodes copy only checkpoints announced
with their step, and its work counts as kept once every node copied one step
(workers/services/checkpoint_cuts.py). Every copy runs in a thread: storage only, no
database; the lease is renewed meanwhile where nothing else renews it.
"""

from __future__ import annotations

import logging
import os
import shutil
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from datetime import datetime
from pathlib import Path
from typing import NamedTuple, TypeVar

from django.conf import settings
from django.utils import timezone

from workers.agent.command import AttemptPaths
from workers.agent.outages import answer_or_none
from workers.services.attempts import (
    AttemptClaim,
    Verdict,
    attempt_free_gpus,
    attempt_heartbeat,
)
from workers.services.checkpoints import (
    MARKER,
    Taken,
    checkpoint_discard,
    checkpoint_pack,
    checkpoint_unpack,
    empty_directory,
    packing_path,
)
from workers.services.ranks import rank_free_gpus, rank_heartbeat

log = logging.getLogger(__name__)
T = TypeVar("T")


def running_copies(claim: AttemptClaim, paths: AttemptPaths) -> RunningCopies | None:
    """Copies of the node's checkpoints while the binary runs (RunningCopies below)."""
    if not settings.GPUSCHED_STORE_CHECKPOINTS:
        return None
    return RunningCopies(claim.job_id, claim.attempt_id, claim.node_rank, paths.checkpoint_dir,
                         every_s=settings.GPUSCHED_METER_INTERVAL_S, gang=len(claim.nodes) > 1)


def renew_lease(claim: AttemptClaim) -> Verdict | None:
    """Only the lease (a rank's or the attempt's), while the binary is not running; None when
    the database did not answer (what waits goes on: workers/agent/outages.py)."""
    def renew() -> Verdict:
        if claim.node_rank:
            return rank_heartbeat(attempt_id=claim.attempt_id, token=claim.token,
                                  rank=claim.node_rank)
        return attempt_heartbeat(attempt_id=claim.attempt_id, token=claim.token)

    return answer_or_none(renew, "heartbeat", claim.attempt_id)


def keeping_the_lease(claim: AttemptClaim, copy: Callable[[], T]) -> T:
    """Run `copy` (storage only, no database) in a thread while this thread renews the lease:
    copying a large checkpoint may outlast a lease."""
    with ThreadPoolExecutor(max_workers=1) as pool:
        future = pool.submit(copy)
        while True:
            try:
                return future.result(timeout=settings.GPUSCHED_HEARTBEAT_SECONDS)
            except TimeoutError:
                renew_lease(claim)


def resume_from(claim: AttemptClaim, paths: AttemptPaths) -> None:
    """The stored copy of this node's checkpoint, in place before the binary starts. A gang
    with no cut to resume from starts afresh on every node: what one node's directory holds
    from an earlier attempt would resume that node alone, from where it was."""
    clear_leftovers(paths.checkpoint_dir)
    if not claim.checkpoint and len(claim.nodes) > 1 and settings.GPUSCHED_STORE_CHECKPOINTS:
        empty_directory(paths.checkpoint_dir)
    if claim.checkpoint and keeping_the_lease(
            claim, lambda: checkpoint_unpack(claim.checkpoint, paths.checkpoint_dir)):
        log.info("attempt %s resumes from %s", claim.attempt_id, claim.checkpoint,
                 extra={"attempt_id": claim.attempt_id, "job_id": claim.job_id})


def clear_leftovers(directory: Path) -> None:
    """What an agent killed while it copied left beside the checkpoint directory: the links
    of a copy and a tar being packed, each as large as a checkpoint, which nothing else
    removes before the job ends."""
    for linked in directory.parent.glob(_snapshot(directory, "*").name):
        shutil.rmtree(linked, ignore_errors=True)
    packing_path(directory).unlink(missing_ok=True)


def _snapshot(directory: Path, n: int | str) -> Path:
    """Where the n-th checkpoint linked for a copy is linked ("*": any of them)."""
    return directory.with_name(f".{directory.name}-copy-{n}")


def store_checkpoint(claim: AttemptClaim, paths: AttemptPaths) -> str:
    """A copy of the checkpoint of a node that stopped to resume, for the next attempt's
    nodes; "" if there is none, or it could not be stored (a resume on this node, or on
    nodes sharing the work root, still finds it). The node frees its GPUs first, so that
    the preemptor does not wait for the copy."""
    if not settings.GPUSCHED_STORE_CHECKPOINTS:
        return ""
    def free_gpus() -> object:  # unanswered: they are freed by the report instead
        if claim.node_rank:
            return rank_free_gpus(attempt_id=claim.attempt_id, token=claim.token,
                                  rank=claim.node_rank)
        return attempt_free_gpus(attempt_id=claim.attempt_id, token=claim.token)

    answer_or_none(free_gpus, "freeing its GPUs", claim.attempt_id)
    try:
        return keeping_the_lease(claim, lambda: checkpoint_pack(
            claim.job_id, claim.attempt_id, claim.node_rank, paths.checkpoint_dir))
    except Exception:
        log.exception("could not store the checkpoint of attempt %s", claim.attempt_id,
                      extra={"attempt_id": claim.attempt_id, "job_id": claim.job_id})
        return ""


class _Linked(NamedTuple):
    """A checkpoint's files, hard-linked where the copy reads them."""

    path: Path
    at: datetime
    step: int | None


class RunningCopies:
    """One node's copies of an attempt's checkpoints while it runs: announce() as the binary
    announces one (from the thread that reads its output), poll() once a heartbeat, close()
    at its end."""

    def __init__(self, job_id: int, attempt_id: int, rank: int, directory: Path,
                 every_s: float, gang: bool) -> None:
        self.job_id, self.attempt_id, self.rank = job_id, attempt_id, rank
        self.directory, self.every_s, self.gang = directory, every_s, gang
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="checkpoint-copy")
        self._lock = threading.Lock()  # announce() runs in the reader's thread
        self._copy: Future[Taken] | None = None
        self._waiting: _Linked | None = None  # linked, not yet copying
        self._window = -1  # the clock's window of the last checkpoint linked
        self._linked = 0
        self._closed = False  # the reader may read a last line after close()

    def announce(self, step: int | None) -> None:
        """The binary announced a whole checkpoint: its files are linked now, while they are
        that checkpoint's, if it is the first announced in its window of `every_s` seconds
        of the clock; it replaces one linked earlier that waits for the copy in flight. A
        gang's nodes announce the same steps at about the same moments, so they link the same
        steps; they copy only checkpoints announced with their step."""
        if self.gang:
            (self.directory / MARKER).unlink(missing_ok=True)  # it holds no stored copy now
            if step is None:
                return
        window = int(time.time() // self.every_s) if self.every_s > 0 else self._window + 1
        with self._lock:  # one thread announces: none other writes the window meanwhile
            if self._closed or window <= self._window:
                return
        # linked outside the lock: a heartbeat's poll() must never wait on the file system
        linked = self._link(step)
        if linked is None:
            return
        with self._lock:
            dropped = linked if self._closed else self._waiting
            if not self._closed:
                self._window, self._waiting = window, linked
        if dropped is not None:
            shutil.rmtree(dropped.path, ignore_errors=True)

    def poll(self) -> Taken | None:
        """The copy that finished since the last poll, if it was stored; starts copying the
        checkpoint linked last, once no copy is in flight."""
        finished = None
        with self._lock:
            if self._copy is not None and self._copy.done():
                finished, self._copy = self._copy, None
            if self._copy is None and self._waiting is not None:
                self._copy = self._pool.submit(self._pack, self._waiting)
                self._waiting = None
        return self._take(finished) if finished is not None else None

    def close(self) -> None:
        """At the attempt's end: a copy still in flight is waited for and dropped (the copy
        made at a stop, or the job's end, supersedes it)."""
        with self._lock:
            self._closed = True
            waiting, self._waiting = self._waiting, None
            copy, self._copy = self._copy, None
        if waiting is not None:
            shutil.rmtree(waiting.path, ignore_errors=True)
        found = self._take(copy, kept=False) if copy is not None else None
        if found:
            discard_copy(found.name)
        self._pool.shutdown(wait=True)

    def _link(self, step: int | None) -> _Linked | None:
        """Hard-link the directory's files into a sibling directory: an instant, and the
        copy reads them while the binary writes its next checkpoint by rename."""
        self._linked += 1
        snapshot = _snapshot(self.directory, self._linked)
        shutil.rmtree(snapshot, ignore_errors=True)
        try:  # links stay links, as the tar of a stop keeps them: one followed could lead
            # round (`loop -> .`) or over the whole disk (`root -> /`)
            shutil.copytree(self.directory, snapshot, symlinks=True, copy_function=os.link,
                            ignore=shutil.ignore_patterns(MARKER))
        except OSError:  # a file the binary removed while it was linked: the next one
            log.warning("could not link the checkpoint of attempt %s", self.attempt_id,
                        exc_info=True)
            shutil.rmtree(snapshot, ignore_errors=True)
            return None
        return _Linked(snapshot, timezone.now(), step)

    def _pack(self, linked: _Linked) -> Taken:
        try:
            name = checkpoint_pack(self.job_id, self.attempt_id, self.rank, linked.path)
        finally:
            shutil.rmtree(linked.path, ignore_errors=True)
        return Taken(name, linked.at, linked.step)

    def _take(self, copy: Future[Taken], kept: bool = True) -> Taken | None:
        """The finished copy, if it was stored. A `kept` copy of a job on one node is what
        its directory holds now, or a later state of it (its marker names the copy); a
        gang's node must resume from the step its peers resume from, so only a copy put in
        place, or made at the stop, marks a gang's directory."""
        try:
            taken = copy.result()
        except Exception:  # storage down: the next checkpoint tries again
            log.exception("could not copy a checkpoint of attempt %s", self.attempt_id,
                          extra={"attempt_id": self.attempt_id, "job_id": self.job_id})
            return None
        if taken is None or not taken.name:
            return None
        if kept and not self.gang:
            try:
                (self.directory / MARKER).write_text(taken.name)
            except OSError:  # the binary removed its directory: no marker, the copy holds
                log.warning("could not mark the checkpoint of attempt %s", self.attempt_id,
                            exc_info=True)
        return taken


def discard_copy(name: str) -> None:
    """Delete a copy no one will read, if storage lets it: one it keeps is deleted by the
    sweep once its job ends (checkpoints_sweep), and the attempt must go on regardless."""
    try:
        checkpoint_discard(name)
    except Exception:  # any storage backend's error
        log.exception("could not delete checkpoint copy %s", name)
