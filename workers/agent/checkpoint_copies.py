"""How a node's agent carries checkpoints to and from storage (workers/services/checkpoints.py):
put the stored copy in place before the binary starts, copy while it runs, copy when it stops.

A job on one node copies its checkpoint directory to storage while it runs: after the binary
announces a checkpoint (`CHECKPOINT <path>`), at most once a `GPUSCHED_METER_INTERVAL_S`,
one copy at a time. The directory's files are first hard-linked into a sibling directory, in
an instant, so the copy reads one whole checkpoint while the binary writes the next: its
files are replaced by rename, never rewritten in place (docs/fakegen.md). A finished copy is
what the next heartbeat reports as a checkpoint: the attempt's last checkpoint is the moment
its files were linked, and the credits of the work up to it are posted then, so billed work
is work a retry on any node resumes from. A gang's ranks would copy their shares at different
steps, so a gang copies at its stop only. Every copy runs in a thread: storage only, no
database; the lease is renewed meanwhile where nothing else renews it.
"""

from __future__ import annotations

import logging
import os
import shutil
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from datetime import datetime
from pathlib import Path
from typing import TypeVar

from django.conf import settings
from django.utils import timezone

from workers.agent.command import AttemptPaths
from workers.services.attempts import (
    AttemptClaim,
    Verdict,
    attempt_free_gpus,
    attempt_heartbeat,
)
from workers.services.checkpoints import (
    MARKER,
    checkpoint_discard,
    checkpoint_pack,
    checkpoint_unpack,
)
from workers.services.ranks import rank_free_gpus, rank_heartbeat

log = logging.getLogger(__name__)
T = TypeVar("T")


def running_copies(claim: AttemptClaim, paths: AttemptPaths) -> RunningCopies | None:
    """Copies of the checkpoints while the binary runs, for a job on one node
    (RunningCopies below)."""
    if not settings.GPUSCHED_STORE_CHECKPOINTS or len(claim.nodes) > 1:
        return None
    return RunningCopies(claim.job_id, claim.attempt_id, paths.checkpoint_dir,
                         every_s=settings.GPUSCHED_METER_INTERVAL_S)


def _renew(claim: AttemptClaim) -> Verdict:
    """Only the lease (a rank's or the attempt's), between the binary's runs."""
    if claim.node_rank:
        return rank_heartbeat(attempt_id=claim.attempt_id, token=claim.token,
                              rank=claim.node_rank)
    return attempt_heartbeat(attempt_id=claim.attempt_id, token=claim.token)


def keeping_the_lease(claim: AttemptClaim, copy: Callable[[], T]) -> T:
    """Run `copy` (storage only, no database) in a thread while this thread renews the lease:
    copying a large checkpoint may outlast a lease."""
    with ThreadPoolExecutor(max_workers=1) as pool:
        future = pool.submit(copy)
        while True:
            try:
                return future.result(timeout=settings.GPUSCHED_HEARTBEAT_SECONDS)
            except TimeoutError:
                _renew(claim)


def resume_from(claim: AttemptClaim, paths: AttemptPaths) -> None:
    """The stored copy of this node's checkpoint, in place before the binary starts."""
    if claim.checkpoint and keeping_the_lease(
            claim, lambda: checkpoint_unpack(claim.checkpoint, paths.checkpoint_dir)):
        log.info("attempt %s resumes from %s", claim.attempt_id, claim.checkpoint,
                 extra={"attempt_id": claim.attempt_id, "job_id": claim.job_id})


def store_checkpoint(claim: AttemptClaim, paths: AttemptPaths) -> str:
    """A copy of the checkpoint of a node that stopped to resume, for the next attempt's
    nodes; "" if there is none, or it could not be stored (a resume on this node, or on
    nodes sharing the work root, still finds it). The node frees its GPUs first, so that
    the preemptor does not wait for the copy."""
    if not settings.GPUSCHED_STORE_CHECKPOINTS:
        return ""
    if claim.node_rank:
        rank_free_gpus(attempt_id=claim.attempt_id, token=claim.token, rank=claim.node_rank)
    else:
        attempt_free_gpus(attempt_id=claim.attempt_id, token=claim.token)
    try:
        return keeping_the_lease(claim, lambda: checkpoint_pack(
            claim.job_id, claim.attempt_id, claim.node_rank, paths.checkpoint_dir))
    except Exception:
        log.exception("could not store the checkpoint of attempt %s", claim.attempt_id,
                      extra={"attempt_id": claim.attempt_id, "job_id": claim.job_id})
        return ""


class RunningCopies:
    """One attempt's copies while it runs; poll() once a heartbeat, close() at its end."""

    def __init__(self, job_id: int, attempt_id: int, directory: Path, every_s: float) -> None:
        self.job_id, self.attempt_id, self.directory = job_id, attempt_id, directory
        self.every_s = every_s
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="checkpoint-copy")
        self._copy: Future[str] | None = None
        self._linked_at: datetime | None = None  # when the copy in flight was linked
        self._started = -float("inf")  # monotonic start of the last copy
        self._due = False  # a checkpoint was announced since the last copy started

    def poll(self, announced: bool) -> tuple[str, datetime] | None:
        """The copy that finished since the last poll, with the moment it was linked; starts
        the next one when a checkpoint was `announced` and the interval has passed."""
        done = None
        if self._copy is not None and self._copy.done():
            done = self._take()
        self._due = self._due or announced
        if self._copy is None and self._due and time.monotonic() - self._started >= self.every_s:
            self._due = False
            self._start()
        return done

    def close(self) -> None:
        """At the attempt's end: a copy still in flight is waited for and dropped (the copy
        made at a stop, or the job's end, supersedes it)."""
        if self._copy is not None:
            found = self._take(kept=False)
            if found:
                checkpoint_discard(found[0])
        self._pool.shutdown(wait=True)

    def _start(self) -> None:
        self._started, self._linked_at = time.monotonic(), timezone.now()
        snapshot = self.directory.with_name(f".{self.directory.name}-copying")
        shutil.rmtree(snapshot, ignore_errors=True)
        try:
            shutil.copytree(self.directory, snapshot, copy_function=os.link,
                            ignore=shutil.ignore_patterns(MARKER))
        except OSError:  # a file the binary removed while it was linked: the next one
            log.warning("could not link the checkpoint of attempt %s", self.attempt_id,
                        exc_info=True)
            shutil.rmtree(snapshot, ignore_errors=True)
            self._due = True
            return
        self._copy = self._pool.submit(self._pack, snapshot)

    def _pack(self, snapshot: Path) -> str:
        try:
            return checkpoint_pack(self.job_id, self.attempt_id, 0, snapshot)
        finally:
            shutil.rmtree(snapshot, ignore_errors=True)

    def _take(self, kept: bool = True) -> tuple[str, datetime] | None:
        """The finished copy, if it was stored; a `kept` one is what the directory now holds
        or a later state of it (its marker names the copy)."""
        copy, self._copy = self._copy, None
        try:
            name = copy.result() if copy is not None else ""
        except Exception:  # storage down: the next checkpoint tries again
            log.exception("could not copy a checkpoint of attempt %s", self.attempt_id,
                          extra={"attempt_id": self.attempt_id, "job_id": self.job_id})
            return None
        if not name or self._linked_at is None:
            return None
        if kept:
            (self.directory / MARKER).write_text(name)
        return name, self._linked_at
