"""A client of gpusched's REST API (README.md, "API"), in the standard library alone.

    from gpusched_client import Client
    gs = Client("https://gpusched.example", api_key="gs_…")
    job = gs.submit("a red fox in the snow", gpus=2, params={"expected_duration_s": 90})
    done = gs.wait(job["id"])
    gs.output(done["id"], "fox.mp4")

Every submission carries an Idempotency-Key (one is made when none is given), so the retry
after a lost answer gets the job the first try made, never a second one.
"""

from __future__ import annotations

import os
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from gpusched_client.errors import ApiError, Json, PartlySubmitted, WaitTimeout
from gpusched_client.transport import Transport

ENDED = frozenset({"SUCCEEDED", "FAILED", "TIMED_OUT", "CANCELLED", "DEAD"})
BATCH = 100  # jobs a request takes


class Client:
    def __init__(self, url: str | None = None, api_key: str | None = None, **transport) -> None:
        """`url` and `api_key` default to GPUSCHED_URL and GPUSCHED_API_KEY; `transport`:
        `timeout`, `retries`, `backoff_s`, `max_retry_wait_s` (gpusched_client.transport)."""
        url = url or os.environ.get("GPUSCHED_URL")
        api_key = api_key or os.environ.get("GPUSCHED_API_KEY")
        if not url or not api_key:
            raise ValueError("a URL and an API key are needed (GPUSCHED_URL, GPUSCHED_API_KEY)")
        self.transport = Transport(url, api_key, **transport)

    def submit(self, prompt: str, *, gpus: int = 1, idempotency_key: str | None = None,
               dry_run: bool = False, **fields) -> Json:
        """`202 {id, state, url, backlog_s}`; `fields` as `POST /api/v1/jobs` takes them
        (params, gpu_types, time_limit_s, project, labels, after, ...)."""
        key = idempotency_key or str(uuid.uuid4())
        return self._call("POST", "/api/v1/jobs", body={"prompt": prompt, "gpus": gpus, **fields},
                          query=[("dry_run", "true")] if dry_run else None,
                          headers={"Idempotency-Key": key}, safe=True)

    def submit_batch(self, jobs: Sequence[Json], *, idempotency_key: str | None = None) -> Json:
        """Up to 100 jobs, all or none: `{jobs: [{id, state, url}], backlog_s}`."""
        key = idempotency_key or str(uuid.uuid4())
        return self._call("POST", "/api/v1/jobs/batch", body={"jobs": list(jobs)},
                          headers={"Idempotency-Key": key}, safe=True)

    def submit_many(self, jobs: Sequence[Json], *, idempotency_key: str | None = None
                    ) -> list[Json]:
        """Any number of jobs, in batches of 100 (`{id, state, url}` for each, in order).
        Each batch is all or none, the whole is not: a refusal (`PartlySubmitted`) says which
        job it refused and carries the jobs made before it. The key makes one per batch
        (`key/0`, `key/1`, ...): the same call again with the same key makes only what the
        first did not."""
        key = idempotency_key or str(uuid.uuid4())
        made: list[Json] = []
        for n, start in enumerate(range(0, len(jobs), BATCH)):
            try:
                made += self.submit_batch(jobs[start:start + BATCH],
                                          idempotency_key=f"{key}/{n}")["jobs"]
            except ApiError as exc:
                raise PartlySubmitted(exc, made, start) from exc
        return made

    def job(self, job_id: int) -> Json:
        return self._call("GET", f"/api/v1/jobs/{job_id}", safe=True)

    def jobs(self, *, state: str | None = None, project: str | None = None,
             labels: Sequence[str] = (), limit: int = 100) -> Iterator[Json]:
        """The organization's jobs, newest first, every page of them."""
        query = [("limit", str(limit))] + [("label", label) for label in labels]
        query += [(k, v) for k, v in (("state", state), ("project", project)) if v]
        return self._pages("/api/v1/jobs", query)

    def summary(self, *, project: str | None = None, labels: Sequence[str] = ()) -> Json:
        """How many of the organization's jobs (of the project, with each label) are in each
        state, the GPUs they hold, the GPU-hours they ran and their credits: a batch's
        progress, an experiment's cost."""
        query = [("label", label) for label in labels]
        query += [("project", project)] if project else []
        return self._call("GET", "/api/v1/jobs/summary", query=query, safe=True)

    def api_keys(self) -> Iterator[Json]:
        """The organization's API keys, newest first (never their secrets): scope, user,
        last use, expiry, revocation, and whether each is `live`."""
        return self._pages("/api/v1/keys", [("limit", "500")])

    def history(self, job_id: int) -> Iterator[Json]:
        """The job's history, newest first: each move of its state, change of its request or
        time limit, hold, and cancel asked of it while it ran, with who and why (`reason`)."""
        return self._pages(f"/api/v1/jobs/{job_id}/events", [("limit", "100")])

    def audit_trail(self) -> Iterator[Json]:
        """What the organization's people and operators changed in it, newest first: keys,
        webhooks, projects, budgets, members, a suspension, a refund (`action`, `by`,
        `detail`)."""
        return self._pages("/api/v1/events", [("limit", "100")])

    def _pages(self, path: str, query: list[tuple[str, str]]) -> Iterator[Json]:
        """Every row of a paged listing, page after page as it is read."""
        page = self._call("GET", path, query=query, safe=True)
        while True:
            yield from page["results"]
            if not page.get("next"):
                return
            page = self._call("GET", page["next"], safe=True)

    def wait(self, job_id: int, *, timeout: float | None = None, poll_s: float = 2.0,
             max_poll_s: float = 30.0) -> Json:
        """The job once it has ended (any end: look at its `state`); WaitTimeout if it has not
        by `timeout` seconds. Polls, a little less often the longer it waits, and again soon
        after the start or end the service estimates for it."""
        for poll in self._polls(timeout, poll_s, max_poll_s):
            job = self.job(job_id)
            if job["state"] in ENDED:
                return job
            if poll.left is not None and poll.left <= 0:
                raise WaitTimeout(job)
            poll.due_in = _due_in([job])
        raise AssertionError("unreachable")  # the polls go on until one returns or raises

    def wait_all(self, job_ids: Sequence[int], *, timeout: float | None = None,
                 poll_s: float = 2.0, max_poll_s: float = 30.0) -> list[Json]:
        """The jobs once every one has ended, in the order given; WaitTimeout (the first
        still waiting, `waiting` all of them) if some have not by `timeout` seconds. Each poll
        is one request per 100 jobs still waiting, not one per job."""
        ended: dict[int, Json] = {}
        for poll in self._polls(timeout, poll_s, max_poll_s):
            waiting = [i for i in dict.fromkeys(job_ids) if i not in ended]
            seen = self._listed(waiting)
            ended.update((i, job) for i, job in seen.items() if job["state"] in ENDED)
            if len(ended) == len(set(job_ids)):
                return [ended[i] for i in job_ids]
            missing = [i for i in waiting if i not in seen]
            if missing:  # not the organization's: a wait that could never end
                raise ApiError(404, "not_found", f"no such job: {missing[0]}")
            still = [seen[i] for i in waiting if i not in ended]
            if poll.left is not None and poll.left <= 0:
                raise WaitTimeout(still[0], waiting=still)
            poll.due_in = _due_in(still)
        raise AssertionError("unreachable")

    def _polls(self, timeout: float | None, poll_s: float, max_poll_s: float
               ) -> Iterator[_Poll]:
        """A poll at a time, with the seconds left until `timeout`; between polls a sleep, a
        little longer each time, but no later than a second past what the poll says is due
        (its `due_in`), nor past the deadline."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            poll = _Poll(None if deadline is None else deadline - time.monotonic())
            yield poll
            pause = poll_s if poll.due_in is None else min(poll_s, poll.due_in + 1.0)
            self.transport.sleep(pause if poll.left is None else max(0.0, min(pause, poll.left)))
            poll_s = min(max_poll_s, poll_s * 1.5)

    def _listed(self, job_ids: Sequence[int]) -> dict[int, Json]:
        """The jobs named, as the listing answers them, 100 a request."""
        found: dict[int, Json] = {}
        for at in range(0, len(job_ids), BATCH):
            chunk = job_ids[at:at + BATCH]
            query = [("limit", str(BATCH))] + [("id", str(i)) for i in chunk]
            page = self._call("GET", "/api/v1/jobs", query=query, safe=True)
            found.update((job["id"], job) for job in page["results"])
        return found

    def amend(self, job_id: int, **changes: object) -> Json:
        """A waiting job that never started takes another request (gpus, min_gpus, gpu_types,
        min_gpu_memory_mb, region, time_limit_s, urgency_s) and keeps its wait; a placed or
        running one a shorter time_limit_s alone. Safe to repeat: the same values set twice
        are set once."""
        return self._call("PATCH", f"/api/v1/jobs/{job_id}", body=changes, safe=True)

    def relax(self, job_id: int) -> Json | None:
        """The job as it takes the relaxation its pending reason offers (another GPU type, or
        fewer GPUs, that would start it sooner: `pending.what_if`); None when none is."""
        offered = (self.job(job_id).get("pending") or {}).get("relaxation")
        return self.amend(job_id, **offered) if offered else None

    def cancel(self, job_id: int) -> Json:
        """Idempotent: a job cancelled already answers as it is."""
        return self._act(job_id, "cancel")

    def hold(self, job_id: int) -> Json:
        return self._act(job_id, "hold")

    def release(self, job_id: int) -> Json:
        return self._act(job_id, "release", done_if="job_not_held")

    def erase(self, job_id: int) -> Json:
        """Erase the ended job's prompt, params, output, logs and checkpoints, for good; its
        state, labels, history and credits stay. Idempotent: an erased job answers as it is;
        one not ended is refused (`job_not_finished`)."""
        return self._act(job_id, "erase")

    def erase_labelled(self, labels: Sequence[str]) -> Json:
        """Erase every ended job that carries each of `labels` (a user's, by the label their
        jobs were sent with), as many requests as it takes: `{erased, left, not_ended}`, the
        ids erased now and how many that match have not ended (cancel them, or wait)."""
        return self._labelled("erase", labels, ("erased",))

    def cancel_labelled(self, labels: Sequence[str]) -> Json:
        """Cancel every job not ended that carries each of `labels` ("key:value" or "key"),
        as many requests as it takes: `{cancelled, stopping, left}`, the ids cancelled now,
        those asked to stop on their nodes, and how many still match that no request took
        (0 unless they kept changing)."""
        return self._labelled("cancel", labels, ("cancelled", "stopping"))

    def hold_labelled(self, labels: Sequence[str]) -> Json:
        """Hold every waiting job that carries each of `labels`, and stop those running that
        checkpoint to hold them: `{held, stopping, left}`."""
        return self._labelled("hold", labels, ("held", "stopping"))

    def release_labelled(self, labels: Sequence[str]) -> Json:
        """Release the client's hold on every job that carries each of `labels`:
        `{released, left, refused}`; `refused` (else None) is the release the credits or a
        budget no longer covered, which stopped it there, the rest still held."""
        return self._labelled("release", labels, ("released",))

    def _labelled(self, act: str, labels: Sequence[str], lists: Sequence[str]) -> Json:
        """POST /api/v1/jobs/{act} for `labels` until nothing matching is left, or a round
        takes none (every job it found had moved on meanwhile), or one is refused. Each
        request is safe to repeat: a job it took is not taken again."""
        if not labels:
            raise ValueError("name at least one label: a bulk change never takes every job")
        done: Json = {name: [] for name in lists}
        seen: set[int] = set()  # a job still stopping is named again by the next request
        while True:
            answer = self._call("POST", f"/api/v1/jobs/{act}", body={"label": list(labels)},
                                safe=True)
            took = [pk for name in lists for pk in answer.get(name, [])]
            for name in lists:
                done[name] += [pk for pk in answer.get(name, []) if pk not in seen]
                seen.update(answer.get(name, []))
            done["left"], refused = answer["left"], answer.get("refused")
            if act == "release":
                done["refused"] = refused
            if act == "erase":
                done["not_ended"] = answer["not_ended"]
            if not answer["left"] or refused or not took:
                return done

    def output(self, job_id: int, path: str | Path) -> Path:
        """Saves the job's output file at `path`; nothing is left there when it cannot (a
        410 `output_expired`, say)."""
        path = Path(path)
        partial = path.with_name(f".{path.name}.part")
        try:
            with partial.open("wb") as out:
                self.transport.request("GET", f"/api/v1/jobs/{job_id}/output", into=out,
                                       safe=True)
        except BaseException:
            partial.unlink(missing_ok=True)
            raise
        return partial.replace(path)

    def log(self, job_id: int, *, stream: str = "stdout", tail: int | None = None,
            attempt: int | None = None, rank: int = 0) -> str:
        """What a try's binary printed (the latest try's unless `attempt` is named)."""
        path = (f"/api/v1/jobs/{job_id}/attempts/{attempt}/log" if attempt is not None
                else f"/api/v1/jobs/{job_id}/log")
        query = [("stream", stream), ("rank", str(rank))] + (
            [("tail", str(tail))] if tail is not None else [])
        answer = self.transport.request("GET", path, query=query, safe=True)
        return answer.content.decode(errors="replace")

    def credits(self) -> Json:
        """Available and held credits, this month's budgets, the latest transfers."""
        return self._call("GET", "/api/v1/credits", safe=True)

    def usage(self, *, month: str | None = None, labels: Sequence[str] = ()) -> Json:
        """A month's (YYYY-MM, UTC; this one by default) credits spent and refunded and
        GPU-hours run, in all, by project and by GPU type, of the organization's jobs or of
        those with each label: an experiment's or a customer's bill."""
        query = [("label", label) for label in labels] + ([("month", month)] if month else [])
        return self._call("GET", "/api/v1/credits/usage", query=query, safe=True)

    def queue(self, *, limit: int = 100) -> Json:
        """The organization's waiting jobs in the scheduler's last line, first in line first."""
        return self._call("GET", "/api/v1/queue", query=[("limit", str(limit))], safe=True)

    def organization(self) -> Json:
        """The organization: its tier, the key in use, each limit beside what it uses of it,
        the nodes dedicated to it, and its own settings."""
        return self._call("GET", "/api/v1/organization", safe=True)

    def set_organization(self, **settings: object) -> Json:
        """Set the organization's `monthly_limit`, `low_credits_threshold` or
        `erase_after_hours` (None: no budget, no retention), those given, all or none (a key
        of scope full)."""
        return self._call("PATCH", "/api/v1/organization", body=settings, safe=True)

    def gpu_types(self) -> list[Json]:
        """Each GPU type the organization may ask for: GPUs, those dedicated to it, the most
        on one node, memory, regions, price."""
        return self._call("GET", "/api/v1/gpu-types", safe=True)["results"]

    def projects(self) -> list[Json]:
        """The organization's projects: weights, running-GPU caps, GPUs held now, budgets."""
        return self._call("GET", "/api/v1/projects", safe=True)["results"]

    def make_project(self, name: str, **settings: object) -> Json:
        """A new project (`weight`, `running_gpu_cap`, `monthly_limit`; a key of scope full).
        Safe to repeat: a retry refused as `project_exists` after a lost answer answers the
        project that try made."""
        return self._repeatable("POST", "/api/v1/projects", body={"name": name, **settings},
                                done_if="project_exists",
                                then=lambda: self._call("GET", f"/api/v1/projects/{name}",
                                                        safe=True))

    def set_project(self, name: str, **settings: object) -> Json:
        """Set a project's `weight`, `running_gpu_cap`, `monthly_limit` (None: no cap, no
        budget), those given, all or none."""
        return self._call("PATCH", f"/api/v1/projects/{name}", body=settings, safe=True)

    def members(self) -> list[Json]:
        """The organization's members: roles, weights, running-GPU caps, GPUs held, budgets."""
        return self._call("GET", "/api/v1/members", safe=True)["results"]

    def set_member(self, username: str, **settings: object) -> Json:
        """Set a member's `weight`, `running_gpu_cap`, `monthly_limit`, those given, all or
        none (a key of scope full; roles are the owners', on the dashboard)."""
        return self._call("PATCH", f"/api/v1/members/{username}", body=settings, safe=True)

    def remove_member(self, username: str) -> Json:
        """Take a member out: their dashboard access and keys end, their jobs stay. Safe to
        repeat: after a lost answer, `keys_revoked` is None (that try's count was lost)."""
        return self._repeatable("DELETE", f"/api/v1/members/{username}", done_if="not_found",
                                then=lambda: {"username": username, "keys_revoked": None})

    def _act(self, job_id: int, act: str, done_if: str | None = None) -> Json:
        """A job's cancel, hold, release or erasure, each safe to repeat: after a lost answer
        the job as it is now answers a retry refused as already done (a release's
        `job_not_held`)."""
        return self._repeatable("POST", f"/api/v1/jobs/{job_id}/{act}", done_if=done_if,
                                then=lambda: self.job(job_id))

    def _repeatable(self, method: str, path: str, *, done_if: str | None,
                    then: Callable[[], Json], body: Json | None = None) -> Json:
        """A change retried as safe: a retry refused with `done_if` after a try whose answer
        was lost is that try's effect, and `then()` is the answer."""
        try:
            return self._call(method, path, body=body, safe=True)
        except ApiError as exc:
            if exc.code != done_if or not exc.after_lost_answer:
                raise
            return then()

    def _call(self, method: str, path: str, **kwargs) -> Json:
        return self.transport.request(method, path, **kwargs).json()


@dataclass
class _Poll:
    left: float | None  # seconds until the wait's deadline; None: it has none
    due_in: float | None = None  # seconds until a job polled is due to start or end


def _due_in(jobs: Sequence[Json]) -> float | None:
    """Seconds until the soonest start (`pending.estimated_start`) or end
    (`progress.estimated_end`) the service estimates for `jobs`; None when none is ahead (a
    client whose clock runs ahead sees them past, and polls as it would without them)."""
    now = time.time()
    ahead = [when - now for when in map(_epoch, (
        (job.get("progress") or {}).get("estimated_end")
        or (job.get("pending") or {}).get("estimated_start") for job in jobs))
        if when is not None and when > now]
    return min(ahead, default=None)


def _epoch(stamp: str | None) -> float | None:
    if not stamp:
        return None
    try:
        return datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None
