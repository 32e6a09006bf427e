"""Failures of the simulated fleet: nodes that fail and come back, nodes taken down for
their maintenance, binaries that crash, and the retries (with the service's budget and
backoff) or dead letters that follow; a mixin of the engine's `Simulator`, whose state it
reads and moves."""

from __future__ import annotations

from typing import Any

from .model import SimJob


class Failures:
    # the Simulator's, as this mixin uses them
    nodes: dict[str, Any]
    attempts: dict[int, Any]
    nominated: dict[int, Any]
    owner: dict[tuple[str, int], int]
    events: Any
    ledger: Any
    stats: dict[str, float]
    rng: Any
    crash_rng: Any
    now: float
    done: int
    down: int
    retrying: int
    fail_rate: float
    crash_rate: float
    repair_s: float
    max_retries: int
    retry_backoff_s: float
    maintenance: Any

    def _draw_crash(self, att: Any) -> None:
        """When the attempt's binary crashes, if before its end: any of its GPUs may."""
        if self.crash_rate <= 0:
            return
        crash_at = att.start + self.crash_rng.expovariate(self.crash_rate * att.gpus)
        if crash_at < att.end_at:
            att.crash_at = crash_at
            self.events.push(crash_at, "crash", att.id)

    def _crash(self, attempt_id: int, t: float) -> None:
        att = self.attempts.get(attempt_id)
        if att is None or att.crash_at != t:  # it ended or stopped first
            return
        self.stats["crashes"] += 1
        self._stop(att, "crash")

    def _retry_or_dead(self, job: SimJob, avoid: str) -> None:
        if job.retries >= self.max_retries:
            job.dead = True
            self.done += 1
            self.stats["dead"] += 1
            return
        delay = min(600.0, self.retry_backoff_s * 2 ** job.retries)
        job.retries += 1
        job.avoid = avoid
        self.retrying += 1
        self.stats["retries"] += 1
        self.events.push(self.now + delay, "retry", job)

    def _fail(self, name: str) -> None:
        if self._take_down(name, "failure"):
            self.stats["node_failures"] += 1
            self.events.push(self.now + self.repair_s, "repair", name)

    def _maintain(self, name: str) -> None:
        """The node's maintenance begins: down, back after it. What still runs there is lost
        as with a failure, but for a window's: the service evacuates those (docs/nodes.md),
        so they wait again with what their checkpoints keep, spending no retry."""
        cause = "evacuate" if self.maintenance.mode == "window" else "maintenance"
        if self._take_down(name, cause):
            self.events.push(self.now + self.maintenance.duration, "repair", name)

    def _take_down(self, name: str, cause: str) -> bool:
        """The node goes down: its attempts are lost (`cause`), its nominations undone."""
        node = self.nodes[name]
        if not node.up:
            return False
        node.up = False
        self.down += 1
        self.ledger.healthy -= node.spec.gpus
        for job_id, (job, allocs) in list(self.nominated.items()):
            if any(a.node == name for a in allocs):
                del self.nominated[job_id]
                for a in allocs:
                    self.nodes[a.node].nominated.difference_update(a.gpus)
                self.ledger.waiting_delta(job, -1)
                since = job.queued_since
                self._enqueue(job, t=self.now)
                job.queued_since = since
        node.nominated.clear()
        for att in [a for a in self.attempts.values() if any(x.node == name for x in a.allocs)]:
            self._stop(att, cause)
        node.free.clear()
        return True

    def _repair(self, name: str) -> None:
        node = self.nodes[name]
        node.up = True
        self.down -= 1
        self.ledger.healthy += node.spec.gpus
        node.free = set(range(node.spec.gpus)) - {g for (n, g) in self.owner if n == name}
        self._schedule_failure(name)

    def _schedule_failure(self, name: str) -> None:
        if self.fail_rate > 0:
            self.events.push(self.now + self.rng.expovariate(self.fail_rate), "fail", name)

