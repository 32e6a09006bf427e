"""What a call to gpusched can end in, other than its answer."""

from __future__ import annotations

from typing import Any

Json = dict[str, Any]  # an answer's JSON object


class ApiError(Exception):
    """gpusched refused the call: `status`, the machine-readable `code` and `message` of its
    `{"error": ...}` body, the body itself, and `retry_after` (seconds) where it said when to
    try again (a 429, or a 503 on the way to it); `after_lost_answer`: it answered a retry
    after a try that may have been done without its answer reaching the client."""

    def __init__(self, status: int, code: str, message: str, *, body: Json | None = None,
                 retry_after: float | None = None) -> None:
        super().__init__(f"{status} {code}: {message}")
        self.status = status
        self.code = code
        self.message = message
        self.body = body or {}
        self.retry_after = retry_after
        self.after_lost_answer = False


class PartlySubmitted(ApiError):
    """A batch of a `submit_many` was refused: the refusal, with `index` the job it refused
    among all those given, and `made` the jobs the batches before it made."""

    def __init__(self, refusal: ApiError, made: list[Json], offset: int) -> None:
        super().__init__(refusal.status, refusal.code, refusal.message, body=refusal.body,
                         retry_after=refusal.retry_after)
        at = _index(refusal.body)
        self.index = None if at is None else offset + at
        self.made = made


def _index(body: Json) -> int | None:
    """The job of a batch a refusal names: `index`, or the first under `fields.jobs` (a
    malformed job)."""
    if isinstance(body.get("index"), int):
        return body["index"]
    jobs = (body.get("fields") or {}).get("jobs")
    keys = [int(k) for k in jobs if str(k).isdigit()] if isinstance(jobs, dict) else []
    return min(keys, default=None)


class Unreachable(Exception):
    """No answer came back, after every retry the call was safe to make."""


class WaitTimeout(Exception):
    """The job had not ended when the wait ran out; `job` is what it was last seen as, and
    `waiting` every job a `wait_all` still waited for."""

    def __init__(self, job: Json, waiting: list[Json] | None = None) -> None:
        more = f" (and {len(waiting) - 1} more)" if waiting and len(waiting) > 1 else ""
        super().__init__(f"job {job.get('id')} is still {job.get('state')}{more}")
        self.job = job
        self.waiting = waiting if waiting is not None else [job]
