"""The queue as the tick loads it, kept between ticks so that only changed rows are read.

At 50,000 queued jobs, reading and building every job took about 250 ms of each tick, most
of it for rows that had not changed since the tick before. On PostgreSQL every row carries
`xmin`, the transaction that wrote its current version: any UPDATE gives the row a new one.
A tick reads (id, xmin) of the queue, then reads in full only the rows whose version it has
not seen. Names are not cached with the rows: organizations (slug, tier) and projects are
small tables read every tick, so an organization moved to another tier is seen at once.
Each load also keeps the pending reason every row held, so that the tick writes only the
reasons that changed (reasons.write_reasons). A job without the client's estimate takes its
project's learned run time, else the fleet's (runtimes.py), kept up to date on the cached
jobs as it moves.

Only committed versions may be cached: a transaction that writes a row twice leaves one
xmin for two contents, and a reader inside it would see both. So the cache serves callers
outside any atomic block (the tick runs in autocommit), and others load the queue afresh.
Other databases (the SQLite demo) have no row versions and load it afresh too. And versions
are trusted from one server process only: after a failover, a restore or a crash,
transaction ids may be handed out again.
"""

from __future__ import annotations

import json
from bisect import bisect_left, insort
from collections import defaultdict
from collections.abc import Iterable, Mapping
from sys import intern
from typing import Any

from django.db import connection
from django.db.models import TextField, Value
from django.db.models.expressions import RawSQL
from django.db.models.fields.json import KT
from django.db.models.functions import Cast, Coalesce

from jobs import policy as P
from jobs.models import Job, Organization, Project
from jobs.policy.deadlines import deadline_keys
from jobs.scheduler.runtimes import Key as RunTimeKey
from jobs.scheduler.runtimes import run_time_of
from jobs.states import JobState

Row = tuple[Any, ...]  # the columns of _COLUMNS, the row's version last (kept: up to _SPEC)
Key = tuple[float, float, int]  # (virtual deadline, enqueued_at, id): the policy's order
Names = tuple[dict[int, tuple[str, str]], dict[int, str]]

# The pending reason a row holds (code, text, what-if, estimated start): the tick writes a
# reason only where it differs (reasons.write_reasons)
HELD = ("pending_code", "pending_reason", "pending_what_if", "estimated_start")
_COLUMNS = ("pk", "organization_id", "project_id", "gpus", "enqueued_at", "time_limit_s",
            "expected", "types", "min_gpu_memory_mb", "region", "user", "preemptions",
            "checkpointable", "min_gpus", "urgency_s", "avoid_node", "preemptible", *HELD,
            "row_version")
_SPEC = _COLUMNS.index(HELD[0])  # the columns before it build a QueuedJob: the rows kept
_HELD = slice(_SPEC, _SPEC + len(HELD))
# Past this many changed rows one ordered read of the whole queue beats patching the order.
REFRESH_ALL_FRACTION = 0.25


class QueueCache:
    """Queued jobs by id with the version each was read at, in the policy's order."""

    def __init__(self, versioned: bool) -> None:
        self.versioned = versioned  # rows carry xmin: a later tick may reuse them
        self.rows: dict[int, Row] = {}
        self.versions: dict[int, str] = {}  # id -> the version its row was read at
        self.held: dict[int, tuple[Any, ...]] = {}  # id -> the pending reason its row held
        self.jobs: dict[int, P.QueuedJob] = {}
        self.order: list[Key] = []
        self.limit_weight: float | None = None
        self.names: Names = ({}, {})
        self.type_lists: dict[str, tuple[str, ...]] = {}
        self.run_times: Mapping[RunTimeKey, float] = {}
        self.predicted: dict[RunTimeKey, set[int]] = defaultdict(set)  # ids without estimate
        self.last_read = 0  # rows read in full by the last load (for tests and benches)
        self.server: object = None  # when the database server started (versioned only)

    def load(self, limit_weight: float, run_times: Mapping[RunTimeKey, float] | None = None
             ) -> list[P.QueuedJob]:
        """Every queued job, by virtual deadline (`limit_weight`), oldest first on ties;
        those without an estimate expect their learned `run_times` (runtimes.run_time_of)."""
        if not self.versioned or not self._same_server() or not self.rows \
                or limit_weight != self.limit_weight:
            self._read_all(limit_weight)
        else:
            self._read_changed(limit_weight)
        names = read_names()  # after the rows: every organization they name is in it
        if names != self.names:
            self.names, self.jobs = names, {}  # rebuilt from the cached rows below
        self._follow(run_times or {})
        jobs, build = self.jobs, self._build
        return [job for _, _, pk in self.order
                if (job := jobs.get(pk) or build(pk)) is not None]

    def _follow(self, run_times: Mapping[RunTimeKey, float]) -> None:
        """Give the built jobs without an estimate the run times that moved since."""
        old = self.run_times
        if run_times == old:
            return
        jobs = self.jobs
        for (project, gpus), ids in self.predicted.items():
            expected = run_time_of(run_times, project, gpus)
            if expected == run_time_of(old, project, gpus):
                continue
            for pk in ids:
                job = jobs.get(pk)
                if job is not None:
                    job.expected_duration_s = _within(expected, job.time_limit_s)
        self.run_times = dict(run_times)

    def _same_server(self) -> bool:
        """Whether the server is the one whose row versions the cache holds. Transaction ids
        are reused after a failover to a replica that missed the last commits, a restore
        to a point in time, or a crash that lost asynchronous commits; each starts another
        server process, so its start time tells."""
        started = server_started()
        same, self.server = started == self.server, started
        return same

    def _read_all(self, limit_weight: float) -> None:
        rows = list(_rows(self.versioned).order_by("enqueued_at", "pk"))
        self.rows = {row[0]: row[:_SPEC] for row in rows}
        self.versions = {row[0]: row[-1] for row in rows}
        shared: dict[tuple[Any, ...], tuple[Any, ...]] = {}  # most rows share a reason
        self.held = {row[0]: shared.setdefault(held, held)
                     for row in rows for held in (row[_HELD],)}
        self.jobs = {}
        self.predicted = defaultdict(set)
        self.limit_weight = limit_weight
        starts = [row[4].timestamp() for row in rows]
        deadlines = deadline_keys(starts, (float(row[5]) for row in rows), limit_weight)
        # rows come oldest first and the sort is stable: (deadline, enqueued_at, id) order
        self.order = [(deadlines[i], starts[i], rows[i][0])
                      for i in sorted(range(len(rows)), key=deadlines.__getitem__)]
        self.last_read = len(rows)

    def _read_changed(self, limit_weight: float) -> None:
        versions = _versions()
        seen = self.versions.get
        stale = [pk for pk, version in versions.items() if seen(pk) != version]
        if len(stale) > REFRESH_ALL_FRACTION * max(len(versions), 1):
            self._read_all(limit_weight)
            return
        gone = self.versions.keys() - versions.keys()
        fresh = list(_rows(True).filter(pk__in=stale)) if stale else []
        for pk in (*gone, *stale):
            self._drop(pk)
        for row in fresh:  # a stale row that left the queue meanwhile is not read: dropped
            self._add(row, limit_weight)
        self.last_read = len(fresh)

    def _drop(self, pk: int) -> None:
        row = self.rows.pop(pk, None)
        if row is None:
            return
        del self.versions[pk], self.held[pk]
        self.predicted.get((row[2], row[3]), set()).discard(pk)
        self.jobs.pop(pk, None)
        del self.order[bisect_left(self.order, self._key(row, self.limit_weight))]

    def _add(self, row: Row, limit_weight: float) -> None:
        self.rows[row[0]] = row[:_SPEC]
        self.versions[row[0]] = row[-1]
        self.held[row[0]] = row[_HELD]
        insort(self.order, self._key(row, limit_weight))

    @staticmethod
    def _key(row: Row, limit_weight: float | None) -> Key:
        start = row[4].timestamp()
        (deadline,) = deadline_keys((start,), (float(row[5]),), limit_weight or 0.0)
        return (deadline, start, row[0])

    def _build(self, pk: int) -> P.QueuedJob | None:
        (_, org_id, project_id, gpus, enqueued, limit, expected, types, memory, region, user,
         preemptions, checkpointable, min_gpus, urgency, avoid, preemptible) = self.rows[pk]
        orgs, projects = self.names
        if org_id not in orgs or project_id not in projects:
            return None  # deleted since its row was read: its jobs go with it
        org, tier = orgs[org_id]
        estimate = seconds_or_none(expected)
        if estimate is None:
            self.predicted[project_id, gpus].add(pk)
            estimate = _within(run_time_of(self.run_times, project_id, gpus), float(limit))
        # positional, in field order: a keyword call costs a third more
        job = self.jobs[pk] = P.QueuedJob(
            pk, org, tier, gpus, enqueued.timestamp(), float(limit),
            estimate, self._types(types), memory, region,
            projects[project_id], intern(user), preemptions, checkpointable, min_gpus,
            float(urgency), avoid, preemptible,
        )
        return job

    def _types(self, text: str) -> tuple[str, ...]:
        """Shared tuples: most jobs accept any type ("[]") or one of a few lists."""
        if text == "[]":
            return ()
        types = self.type_lists.get(text)
        if types is None:
            types = self.type_lists[text] = tuple(json.loads(text))
        return types


def read_names() -> Names:
    """Interned names, so that grouping the queue compares them by identity."""
    orgs = {pk: (intern(slug), intern(tier)) for pk, slug, tier in
            Organization.objects.values_list("pk", "slug", "tier__name")}
    projects = {pk: intern(name) for pk, name in Project.objects.values_list("pk", "name")}
    return orgs, projects


def _version_sql() -> str:
    return f'"{Job._meta.db_table}".xmin::text'


def _rows(versioned: bool):
    """The queue's rows as plain tuples (this runs over the whole queue on a cold start)."""
    version = (RawSQL(_version_sql(), (), output_field=TextField()) if versioned
               else Value(None, output_field=TextField()))
    return (Job.objects.filter(state=JobState.QUEUED)
            # the JSON values as text: decoding them as JSON was half of the load at 20,000
            # queued, and most jobs give no estimate and accept any GPU type ("[]")
            .annotate(expected=KT("params__expected_duration_s"),
                      types=Cast("gpu_types", TextField()),
                      user=Coalesce(Cast("submitted_by_id", TextField()), Value(""),
                                    output_field=TextField()),
                      row_version=version)
            .values_list(*_COLUMNS))


def server_started() -> object:
    with connection.cursor() as cur:
        cur.execute("SELECT pg_postmaster_start_time()")
        return cur.fetchone()[0]


def _versions() -> dict[int, str]:
    with connection.cursor() as cur:
        cur.execute(f"SELECT id, {_version_sql()} FROM {Job._meta.db_table} WHERE state = %s",
                    [JobState.QUEUED])
        return dict(cur.fetchall())


def seconds_or_none(value) -> float | None:
    """A client's duration estimate, if it is a usable number."""
    if value is None:  # most jobs give none; a raised TypeError costs 3 us a job
        return None
    try:
        seconds = float(value)
    except (TypeError, ValueError):
        return None
    return seconds if seconds > 0 else None


def _within(expected: float | None, limit: float) -> float | None:
    """A learned run time, never past the job's own limit (the service stops it there)."""
    return None if expected is None else min(expected, limit)


# By database name. The tick holds its lock (lock.py) while it loads, so one load at a time
_shared: dict[str, QueueCache] = {}
_served: list[QueueCache | None] = [None]  # what served this process's last load


def queued_jobs(limit_weight: float, run_times: Mapping[RunTimeKey, float] | None = None
                ) -> list[P.QueuedJob]:
    """The queue in the policy's order, from this process's cache where it may serve."""
    if connection.vendor != "postgresql" or connection.in_atomic_block:
        _served[0] = fresh = QueueCache(versioned=False)
        return fresh.load(limit_weight, run_times)
    _served[0] = cache = shared_cache()
    return cache.load(limit_weight, run_times)


def queue_rows_read() -> int:
    """Rows this process's last queue load read in full (all of them when read afresh)."""
    cache = _served[0]
    return cache.last_read if cache is not None else 0


def held_reasons() -> Mapping[int, tuple[Any, ...]] | None:
    """What each row held when this process's last queue load read it: the tick's writer
    then skips, without asking the database, the reasons already there."""
    cache = _served[0]
    return cache.held if cache is not None else None


def shared_cache() -> QueueCache:
    """This process's cache of the queue of the database it is connected to."""
    name = connection.settings_dict["NAME"]
    if name not in _shared:
        _shared[name] = QueueCache(versioned=True)
    return _shared[name]


def without(queue: list[P.QueuedJob], excluded: Iterable[int]) -> list[P.QueuedJob]:
    skip = set(excluded)
    return [job for job in queue if job.job_id not in skip] if skip else queue
