"""Classify how the binary ended (pure: no Django, no I/O)."""

from __future__ import annotations

EXIT_OK = 0
EXIT_CHECKPOINTED = 75  # EX_TEMPFAIL: stopped on SIGTERM after writing a checkpoint
EXIT_OOM_KILLED = 137  # 128 + SIGKILL, what the kernel's OOM killer leaves
STDERR_TAIL = 4000  # the last bytes of stderr an attempt's end is judged by
# how frameworks say a GPU ran out of memory (lowercased): PyTorch, JAX, CuPy and CUDA's
# own text ("out of memory"), TensorFlow ("OOM when allocating tensor"), cuBLAS and cuDNN
# ("CUBLAS_STATUS_ALLOC_FAILED": an allocation failed inside them), CUDA's error names
OOM_MARKERS = ("out of memory", "outofmemoryerror", "oom when allocating",
               "status_alloc_failed", "cudaerrormemoryallocation", "cuda_error_out_of_memory")
# exits by which a binary says its input or setup is wrong, which a second try repeats:
# 2, a command-line misuse (argparse, shells), and the sysexits.h codes but EX_TEMPFAIL
PERMANENT_EXITS = frozenset({2, *range(64, 79)}) - {EXIT_CHECKPOINTED}
# failures another try may not repeat: the binary hung, or wrote a broken output, or its
# node could not start it (a binary missing there, a work root it cannot write): the node's
LAUNCH_FAILED = "launch_failed"
RETRYABLE_CODES = frozenset({"hung", "corrupt_output", LAUNCH_FAILED})


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


FAILURE_KINDS = ("crash", "hung", "corrupt_output", "out_of_memory", "bad_input",
                 LAUNCH_FAILED)


def failure_kind(*, outcome: str, error_code: str, exit_code: int | None) -> str:
    """The kind of a failed run (FAILURE_KINDS), for counting: exit codes are too many."""
    if outcome == "OOM":
        return "out_of_memory"
    if error_code in RETRYABLE_CODES:
        return error_code
    return "bad_input" if exit_code in PERMANENT_EXITS else "crash"


def retryable(*, outcome: str, error_code: str, exit_code: int | None) -> bool:
    """Whether another try of a failed run may succeed: a crash, a hang or a broken output
    may be the node's or the moment's (a GPU fault, a network blip in a collective), unless
    the binary said by its exit status that its input is at fault. An OOM is not: the same
    GPUs run out again (services/retries.py moves it to bigger ones where it may)."""
    if outcome != "FAILED":
        return False
    if error_code in RETRYABLE_CODES:
        return True
    return error_code.startswith("exit_") and exit_code not in PERMANENT_EXITS
