"""Classify how the binary ended (pure: no Django, no I/O)."""

from __future__ import annotations

EXIT_OK = 0
EXIT_CHECKPOINTED = 75  # EX_TEMPFAIL: stopped on SIGTERM after writing a checkpoint
EXIT_OOM_KILLED = 137  # 128 + SIGKILL, what the kernel's OOM killer leaves
OOM_MARKERS = ("out of memory", "cuda error: out of memory", "outofmemoryerror")


def classify(*, exit_code: int | None, stderr_tail: str, stop: str,
             output_ok: bool) -> tuple[str, str]:
    """Return (attempt outcome, error code) for one ended run.

    `stop` says why the agent stopped the binary, if it did: "preempt" or "cancel" (asked
    by the scheduler), "timeout" (time limit) or "hung" (silent too long).
    """
    if stop == "cancel":
        return "CANCELLED", "cancelled"
    if stop == "preempt" and exit_code != EXIT_OK:
        return "PREEMPTED", ""
    if stop == "timeout":
        return "TIMED_OUT", "time_limit"
    if stop == "hung":
        return "FAILED", "hung"
    if exit_code == EXIT_OK:
        return ("SUCCEEDED", "") if output_ok else ("FAILED", "corrupt_output")
    lowered = stderr_tail.lower()
    if exit_code in (EXIT_OOM_KILLED, -9) or any(m in lowered for m in OOM_MARKERS):
        return "OOM", "out_of_memory"
    return "FAILED", f"exit_{exit_code}"
