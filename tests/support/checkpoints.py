"""Checkpoint directories, stored copies and gangs for the checkpoint tests."""

import time
from pathlib import Path

from jobs.models import Attempt
from jobs.scheduler.tick import scheduler_tick_run
from jobs.services.requeue import attempt_stop_and_requeue
from tests.support.factories import make_job, make_node
from workers.services.attempts import AttemptClaim, AttemptResult, attempt_finish, attempt_start
from workers.services.checkpoints import MARKER
from workers.services.ranks import rank_finish, rank_start


def files_of(directory: Path) -> dict[str, bytes]:
    return {str(p.relative_to(directory)): p.read_bytes()
            for p in sorted(directory.rglob("*")) if p.is_file() and p.name != MARKER}


def write_checkpoint(directory: Path, step: int) -> Path:
    (directory / "shards").mkdir(parents=True, exist_ok=True)
    (directory / "state.json").write_text(f'{{"step": {step}}}')
    (directory / "shards" / "0.bin").write_bytes(bytes(range(256)) * step)
    return directory


def start_placed(org, gpus: int = 2) -> tuple[Attempt, AttemptClaim]:
    """A job of `gpus` placed by a round and started: on one node n1 of that size, or, for
    8 GPUs, a gang on two 4-GPU nodes of one island."""
    if gpus == 8:
        make_node("n1", gpus=4, island="r1")
        make_node("n2", gpus=4, island="r1")
    else:
        make_node("n1", gpus=gpus)
    job = make_job(org, gpus=gpus)
    scheduler_tick_run()
    attempt = Attempt.objects.get(job=job)
    return attempt, attempt_start(attempt_id=attempt.pk, token=attempt.token)


def stop_gang(gang: Attempt, names: dict[int, str], steps: dict[int, int] | None = None
              ) -> None:
    """Stop a two-node gang (its rank 1 started if it was not), each rank reporting its
    copy (`names`, "" where none was stored) and the step it announced it with (`steps`,
    none by default), and place the next attempt."""
    steps = steps or {}
    if gang.ranks.filter(rank=1, started_at__isnull=True).exists():
        rank_start(attempt_id=gang.pk, token=gang.token, rank=1)
    assert attempt_stop_and_requeue(gang, reason="test", grace_s=30)
    rank_finish(attempt_id=gang.pk, token=gang.token, rank=1, result=AttemptResult(
        "PREEMPTED", 75, checkpoint=names.get(1, ""), checkpoint_step=steps.get(1)))
    attempt_finish(attempt_id=gang.pk, token=gang.token, result=AttemptResult(
        "PREEMPTED", 75, checkpoint=names.get(0, ""), checkpoint_step=steps.get(0)))
    scheduler_tick_run()


def wait_until(predicate, seconds: float = 10.0) -> None:
    deadline = time.monotonic() + seconds
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.02)


def rewrite_by_rename(directory: Path, step: int) -> None:
    """Write the directory's next checkpoint as a binary must: each file replaced by rename."""
    fresh = write_checkpoint(directory.with_name("fresh"), step)
    for name in ("state.json", "shards/0.bin"):
        (fresh / name).replace(directory / name)
