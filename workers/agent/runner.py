"""Run one attempt: claim it, start the binary, supervise it, report how it ended."""

from __future__ import annotations

import contextlib
import ctypes
import dataclasses
import logging
import os
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from django.conf import settings

from workers.agent.checkpoint_copies import (
    RunningCopies,
    discard_copy,
    keeping_the_lease,
    renew_lease,
    resume_from,
    running_copies,
    store_checkpoint,
)
from workers.agent.command import AttemptPaths, UnsafeOutputPath, build_argv, build_env
from workers.agent.discovery import processes_left
from workers.agent.logs import BoundedCopy, LogPublisher, StderrReader
from workers.agent.outages import answer_or_none, answer_within_a_lease
from workers.agent.outcome import LAUNCH_FAILED, STDERR_TAIL, classify
from workers.agent.output_check import output_ok
from workers.agent.progress import ProgressReader
from workers.services.attempts import (
    AttemptClaim,
    AttemptResult,
    StaleAttempt,
    Verdict,
    attempt_finish,
    attempt_heartbeat,
    attempt_start,
    report_recorded,
)
from workers.services.checkpoints import Taken
from workers.services.nodes import node_gpu_strays
from workers.services.ranks import (
    ENDS_THE_GANG,
    job_is_over,
    rank_finish,
    rank_heartbeat,
    rank_start,
    ranks_running,
)

log = logging.getLogger(__name__)
PR_SET_PDEATHSIG = 1  # linux/prctl.h
RANK_POLL_S = 0.25  # how often rank 0 looks whether its gang's other ranks have ended
# a job's params no command line can carry (a seed that is no integer) end the try as a
# binary's exit 2 for a bad command line does, though it never ran: permanent, "bad_input"
# (workers/agent/outcome.py), since each retry would fail on them again
BAD_INPUT_EXIT = 2


@dataclass
class Supervision:
    stop: str = ""  # "preempt", "cancel", "timeout", "hung" or "stale" once asked to stop
    kill_at: float | None = None  # monotonic time of SIGKILL if still alive
    heard_at_stop: int = 0  # checkpoints the binary had announced when asked to stop
    # a copy an unanswered heartbeat carried: the next one records it (once, if both did)
    unsent_copy: Taken | None = None
    failed: str = ""  # why supervision itself broke off: the agent's fault, not the binary's


def _signal_group(proc: subprocess.Popen, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, sig)  # the binary and every child it started


def _ask_to_stop(proc: subprocess.Popen, sup: Supervision, reader: ProgressReader, why: str,
                 grace_s: float) -> None:
    if sup.stop:
        return
    sup.stop, sup.kill_at = why, time.monotonic() + grace_s
    sup.heard_at_stop = reader.checkpoints_heard()
    log.info("stopping pid %s (%s), SIGKILL in %.0fs", proc.pid, why, grace_s,
             extra={"pid": proc.pid, "stop": why})
    _signal_group(proc, signal.SIGTERM)


def _supervise(proc: subprocess.Popen, claim: AttemptClaim, reader: ProgressReader,
               copies: RunningCopies | None, logs: LogPublisher) -> Supervision:
    sup = Supervision()
    began = time.monotonic()
    deadline = began + claim.time_limit_s
    beat = settings.GPUSCHED_HEARTBEAT_SECONDS
    while True:
        try:
            proc.wait(timeout=beat)
            return sup
        except subprocess.TimeoutExpired:
            pass
        verdict = _heartbeat(claim, reader, copies, sup)
        logs.due()
        if verdict is None:  # the database did not answer: the binary is supervised on
            pass
        elif verdict.action == "stale":  # fenced off: another attempt owns this job now
            sup.stop = "stale"
            _signal_group(proc, signal.SIGKILL)
        elif verdict.action in ("preempt", "cancel"):
            _ask_to_stop(proc, sup, reader, verdict.action, verdict.deadline_s)
        if verdict is not None and verdict.time_limit_s is not None:
            deadline = began + verdict.time_limit_s  # an operator may have lengthened it
        if time.monotonic() >= deadline:
            _ask_to_stop(proc, sup, reader, "timeout", settings.GPUSCHED_KILL_GRACE_S)
        if reader.silent_for() >= settings.GPUSCHED_HANG_TIMEOUT_S:
            _ask_to_stop(proc, sup, reader, "hung", settings.GPUSCHED_KILL_GRACE_S)
        if sup.kill_at is not None and time.monotonic() >= sup.kill_at:
            _signal_group(proc, signal.SIGKILL)


def _heartbeat(claim: AttemptClaim, reader: ProgressReader, copies: RunningCopies | None,
               sup: Supervision) -> Verdict | None:
    """The lease renewed and the run's news recorded; None when the database did not
    answer. A copy it carried goes with the next beat (a copy is recorded once, however
    often it is sent); a checkpoint announced without copies does not (recorded at the
    next beat's time, it would bill work the checkpoint did not keep)."""
    copied = _newest(sup.unsent_copy, copies.poll() if copies is not None else None)
    sup.unsent_copy = None
    announced = reader.take_checkpointed()  # without copies, once announced

    def beat() -> Verdict:
        if claim.node_rank:  # progress is rank 0's to report
            return rank_heartbeat(attempt_id=claim.attempt_id, token=claim.token,
                                  rank=claim.node_rank, copied=copied)
        return attempt_heartbeat(attempt_id=claim.attempt_id, token=claim.token,
                                 progress=reader.progress, copied=copied,
                                 checkpointed=announced and copies is None)

    verdict = answer_or_none(beat, "heartbeat", claim.attempt_id)
    if verdict is None:
        sup.unsent_copy = copied
    elif copied and verdict.action == "stale":
        discard_copy(copied.name)
    return verdict


def _newest(unsent: Taken | None, polled: Taken | None) -> Taken | None:
    """A copy stored since an unanswered beat supersedes the one that beat carried."""
    if unsent is not None and polled is not None:
        discard_copy(unsent.name)
    return polled or unsent


def _tail(path: Path, limit: int = STDERR_TAIL) -> str:
    try:
        with path.open("rb") as fh:
            fh.seek(max(0, path.stat().st_size - limit))
            return fh.read().decode(errors="replace")
    except OSError:
        return ""


def _die_with_parent() -> None:
    """In the child before exec: if the worker process dies (kill -9, OOM), so does the binary.

    Without this an orphaned binary would keep GPUs busy that the scheduler, once the
    lease runs out, hands to another attempt.
    """
    libc = ctypes.CDLL("libc.so.6", use_errno=True)
    libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL)


def _command(claim: AttemptClaim, paths: AttemptPaths, seed: int
             ) -> tuple[list[str], dict[str, str]]:
    """The binary's argv and environment; ValueError for a template the operator wrote
    that no command line comes of (a quote not closed, a stray brace)."""
    argv = build_argv(settings.GPUSCHED_BINARY, prompt=claim.prompt, seed=seed, paths=paths)
    env = build_env(gpu_indices=claim.gpu_indices, gpu_uuids=claim.gpu_uuids, paths=paths,
                    attempt_id=claim.attempt_id, job_id=claim.job_id,
                    node_rank=claim.node_rank, nodes=claim.nodes,
                    rendezvous=claim.rendezvous, retry=claim.retry)
    return argv, env


def _launch(command: tuple[list[str], dict[str, str]], paths: AttemptPaths
            ) -> subprocess.Popen:
    argv, env = command
    # own session = own process group, so a kill reaches the binary's children too
    # bytes that are not UTF-8 are read as U+FFFD: a reader that stopped at them would
    # leave the binary silent to the hang detector while it still prints
    return subprocess.Popen(argv, env=env, cwd=paths.work_dir, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, encoding="utf-8",
                            errors="replace", start_new_session=True,
                            preexec_fn=_die_with_parent if sys.platform == "linux" else None)


def run_attempt(attempt_id: int, token: int) -> str:
    """Execute attempt `attempt_id` if `token` is still its fencing token; return its outcome."""
    try:
        claim = answer_within_a_lease(
            lambda: attempt_start(attempt_id=attempt_id, token=token), "start", attempt_id)
    except StaleAttempt as exc:
        log.warning("refused: %s", exc, extra={"attempt_id": attempt_id, "token": token})
        return "stale"
    return _run(claim)


def run_rank(attempt_id: int, token: int, rank: int) -> str:
    """Execute rank `rank` (1, 2, …) of a gang spanning nodes, if `token` is still current."""
    try:
        claim = answer_within_a_lease(
            lambda: rank_start(attempt_id=attempt_id, token=token, rank=rank), "start",
            attempt_id)
    except StaleAttempt as exc:
        log.warning("refused: %s", exc, extra={"attempt_id": attempt_id, "token": token})
        return "stale"
    return _run(claim)


def _run(claim: AttemptClaim) -> str:
    attempt_id = claim.attempt_id
    paths = AttemptPaths.under(settings.GPUSCHED_WORK_ROOT, claim.job_id, claim.attempt_id,
                               suffix=claim.params.get("output_suffix", ".y4m"),
                               rank=claim.node_rank)
    try:  # a job's input no try can use (intake refuses it; one from before may hold it)
        seed = int(claim.params.get("seed", claim.job_id))
        paths.check_output()
    except (ValueError, TypeError, UnsafeOutputPath) as exc:
        return _report(claim, paths, AttemptResult(
            "FAILED", BAD_INPUT_EXIT, f"the job's params cannot start the binary: {exc}",
            error_code=f"exit_{BAD_INPUT_EXIT}"))
    try:  # the node's: a work root it cannot write (full, not mounted), a binary not
        # installed there, a template of its binary no command line comes of
        command = _command(claim, paths, seed)
        paths.create(claim.params)
        resume_from(claim, paths)
        proc = _launch(command, paths)
    except (OSError, ValueError) as exc:
        return _report(claim, paths,
                       AttemptResult("FAILED", None, str(exc), None, LAUNCH_FAILED))
    copies = running_copies(claim, paths)
    kept = {name: BoundedCopy(path, settings.GPUSCHED_LOG_MAX_BYTES)
            for name, path in (("stdout", paths.stdout), ("stderr", paths.stderr))}
    logs = LogPublisher(job_id=claim.job_id, attempt_id=attempt_id, rank=claim.node_rank,
                        files={"stdout": paths.stdout, "stderr": paths.stderr})
    reader = ProgressReader(proc.stdout, copies.announce if copies is not None else None,
                            copy=kept["stdout"].write)
    reader.start()
    errors = StderrReader(proc.stderr, kept["stderr"])
    errors.start()
    sup = _watch(proc, claim, reader, copies, logs)
    for thread in (reader, errors):
        thread.join(timeout=5)
    for copy in kept.values():
        copy.close()
    _hold_gpus_left_in_use(claim)
    # whole before the end is reported: a client that sees it reads it all. A fenced-off
    # try publishes too: what it printed is its own try's log, the clue to why it ran on
    logs.publish()
    if sup.stop == "stale":
        log.warning("attempt %s was fenced off; its result is discarded", attempt_id,
                    extra={"attempt_id": attempt_id, "job_id": claim.job_id})
        return _discard(claim, paths)
    stderr = _tail(paths.stderr)
    if sup.failed:  # the node's fault, as a launch that failed; the SIGKILL is the agent's
        return _report(claim, paths, AttemptResult(
            "FAILED", proc.returncode, f"{stderr}\n[{sup.failed}]", error_code=LAUNCH_FAILED))
    outcome, error_code = classify(
        exit_code=proc.returncode, stderr_tail=stderr, stop=sup.stop,
        # the job's output is rank 0's; the other ranks' end is judged by their exit alone
        output_ok=claim.node_rank > 0 or output_ok(paths.output))
    checkpoint = store_checkpoint(claim, paths) if outcome == "PREEMPTED" else ""
    if claim.node_rank == 0 and len(claim.nodes) > 1 and outcome not in ENDS_THE_GANG:
        _await_ranks(claim, sup)
    return _report(claim, paths, AttemptResult(outcome, proc.returncode, stderr,
                                        paths.output if outcome == "SUCCEEDED" else None,
                                        error_code, checkpoint,
                                        reader.step_since(sup.heard_at_stop) if checkpoint
                                        else None))


def _watch(proc: subprocess.Popen, claim: AttemptClaim, reader: ProgressReader,
           copies: RunningCopies | None, logs: LogPublisher) -> Supervision:
    """Supervise the binary to its end. However supervision ends, an error of the agent's
    own among them, the binary's process group is killed: what it started and left running,
    or the binary itself left unwatched, would hold GPUs the job's end (or the reaper)
    hands to another job."""
    try:
        return _supervise(proc, claim, reader, copies, logs)
    except Exception as exc:
        log.exception("supervising attempt %s failed; its binary is killed", claim.attempt_id,
                      extra={"attempt_id": claim.attempt_id, "job_id": claim.job_id})
        return Supervision(failed=f"the node's agent failed while supervising: {exc!r}")
    finally:
        _signal_group(proc, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):  # the returncode, if it died
            proc.wait(timeout=settings.GPUSCHED_KILL_GRACE_S)
        if copies is not None:  # a copy in flight is dropped: the attempt's end decides
            keeping_the_lease(claim, copies.close)


def _await_ranks(claim: AttemptClaim, sup: Supervision) -> None:
    """Rank 0 of a gang spanning nodes reports the attempt's end once its other ranks have
    ended too, or their time to stop is over: its report ends them, which would kill them
    while they write their share of a checkpoint or exit cleanly. The lease is kept alive."""
    until = sup.kill_at if sup.kill_at is not None else (
        time.monotonic() + settings.GPUSCHED_KILL_GRACE_S)
    beat = time.monotonic()
    # the database not answering (None): its ranks may still run, the lease wants renewing
    while answer_or_none(lambda: ranks_running(claim.attempt_id), "ranks' ends",
                         claim.attempt_id) != 0 and time.monotonic() < until:
        time.sleep(RANK_POLL_S)
        if time.monotonic() - beat >= settings.GPUSCHED_HEARTBEAT_SECONDS:
            beat = time.monotonic()
            verdict = renew_lease(claim)
            if verdict is not None and verdict.action == "stale":
                return


def _hold_gpus_left_in_use(claim: AttemptClaim) -> None:
    """A process that escaped the group kill (its own session) still holds GPU memory: its
    GPUs leave service before the attempt's end frees them (NVML nodes only)."""
    left = processes_left(claim.gpu_uuids)
    if not left:
        return
    try:
        node_gpu_strays(name=claim.node, strays=left, attempt_id=claim.attempt_id)
    except Exception:  # the attempt's outcome must still be reported
        log.exception("could not mark GPUs %s of %s", ", ".join(left), claim.node,
                      extra={"attempt_id": claim.attempt_id})


def _recorded(claim: AttemptClaim, result: AttemptResult) -> bool:
    return answer_within_a_lease(lambda: report_recorded(
        attempt_id=claim.attempt_id, token=claim.token, rank=claim.node_rank,
        outcome=result.outcome, exit_code=result.exit_code), "report", claim.attempt_id)


def _discard(claim: AttemptClaim, paths: AttemptPaths) -> str:
    """A fenced-off attempt removes only its own files: the job's checkpoint (and the job's
    directory) now belong to the attempt that replaced it. A rank's checkpoint is its node's:
    it goes too once the job is over, as nothing else on that node would remove it."""
    shutil.rmtree(paths.work_dir, ignore_errors=True)
    if claim.node_rank and job_is_over(claim.job_id):
        shutil.rmtree(paths.checkpoint_dir, ignore_errors=True)
    return "stale"


def _report(claim: AttemptClaim, paths: AttemptPaths, result: AttemptResult) -> str:
    sent = []

    def finish() -> object:
        sent.append(1)
        if claim.node_rank:
            return rank_finish(attempt_id=claim.attempt_id, token=claim.token,
                               rank=claim.node_rank,
                               result=dataclasses.replace(result, output_path=None))
        return attempt_finish(attempt_id=claim.attempt_id, token=claim.token, result=result)

    try:
        # OSError: the output's copy to storage failed; the next copies it again
        answer_within_a_lease(finish, "report", claim.attempt_id, also=(OSError,))
    except StaleAttempt as exc:
        if len(sent) > 1 and _recorded(claim, result):  # its first answer was lost
            paths.remove(keep_checkpoint=_may_resume(claim, result))
            return result.outcome
        log.warning("result of attempt %s discarded: %s", claim.attempt_id, exc,
                    extra={"attempt_id": claim.attempt_id, "job_id": claim.job_id})
        discard_copy(result.checkpoint)
        return _discard(claim, paths)
    paths.remove(keep_checkpoint=_may_resume(claim, result))
    return result.outcome


def _may_resume(claim: AttemptClaim, result: AttemptResult) -> bool:
    """Whether the job may run again from this node's checkpoint: stopped to resume, or
    waiting to retry after a failure (where the work root is shared and nothing copied the
    checkpoint, it is the only one). A job that ended leaves nothing; the work root's sweep
    removes what a job kept here once it ends elsewhere."""
    if result.outcome == "PREEMPTED":
        return True
    return result.outcome != "SUCCEEDED" and answer_within_a_lease(
        lambda: not job_is_over(claim.job_id), "report", claim.attempt_id)
