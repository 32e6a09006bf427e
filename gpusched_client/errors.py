"""What a call to gpusched can end in, other than its answer."""

from __future__ import annotations


class ApiError(Exception):
    """gpusched refused the call: `status`, the machine-readable `code` and `message` of its
    `{"error": ...}` body, the body itself, and `retry_after` (seconds) where it said when to
    try again (a 429, or a 503 on the way to it); `after_lost_answer`: it answered a retry after
a try that may have been done without its answer reaching the client."""

    def __init__(self, status: int, code: str, message: str, *, body: dict | None = None,
                 retry_after: float | None = None) -> None:
        super().__init__(f"{status} {code}: {message}")
        self.status = status
        self.code = code
        self.message = message
        self.body = body or {}
        self.retry_after = retry_after
        self.after_lost_answer = False


class Unreachable(Exception):
    """No answer came back, after every retry the call was safe to make."""


class WaitTimeout(Exception):
    """The job had not ended when the wait ran out; `job` is what it was last seen as."""

    def __init__(self, job: dict) -> None:
        super().__init__(f"job {job.get('id')} is still {job.get('state')}")
        self.job = job
