"""Calls raced against each other, as two processes would race on the database."""

from __future__ import annotations

import threading
from collections.abc import Callable

from django.db import connection

from workers.services.attempts import StaleAttempt


def race(*ends: Callable[[], object]) -> list[BaseException]:
    """Run the calls at once, each in a thread with its own connection; what they raised
    but StaleAttempt (the fencing refusal a loser of such a race gets)."""
    barrier, errors = threading.Barrier(len(ends)), []

    def run(end):
        barrier.wait()
        try:
            end()
        except StaleAttempt:
            pass  # another was first
        except BaseException as exc:  # noqa: BLE001 - the test reports it
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=run, args=(end,)) for end in ends]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return errors


def hold_and_release_each(job_ids: list[int], by: str, refusals: set[str]) -> None:
    """Hold each job for `by`, then release it, as a client or operator flipping holds would;
    a refusal must be one of `refusals` (the codes the race may give)."""
    from jobs.models import Job
    from jobs.services.job_hold import job_hold, job_release

    for pk in job_ids:
        for act in (job_hold, job_release):
            try:
                act(job=Job.objects.get(pk=pk), by=by)
            except Exception as exc:  # noqa: BLE001 - a refusal, checked by its code
                assert getattr(exc, "code", None) in refusals, exc
