"""The live attempts as each tick's snapshot reads them, kept between ticks in this process.
An attempt that freed its GPUs before its report (it copies its checkpoint,
workers/services/checkpoints.py) holds none and is left out, as an ended one is.

At 5,000 running attempts, reading them in full (joined to their jobs, JSON decoded) took
60-90 ms of each tick on the service bench, though what the policy reads of an attempt
changes only when it starts, is asked to stop, checkpoints or ends, or when its job's row is
written. Heartbeats rewrite each running attempt's row every few seconds, so the attempt
row's own version says nothing. Each tick reads instead a narrow key of every live attempt
(those columns, its fencing token, and its job row's version, `xmin`, as queue_cache.py
reads the queue's) and reads in full only the attempts whose key it has not seen. Names are
not cached: organizations (slug, tier) and projects are read every tick, so an organization
moved to another tier is seen at once.

Versions are trusted as the queue cache trusts them: on PostgreSQL, outside a transaction,
from one server process. Elsewhere (the SQLite demo, a caller in an atomic block) the
attempts are read afresh.
"""

from __future__ import annotations

from typing import Any

from django.db import connection
from django.db.models import QuerySet

from jobs.models import Attempt, Job
from jobs.scheduler.queue_cache import read_names, server_started

# What the snapshot gets per live attempt, in this order (snapshot.load_running reads it)
LIVE_COLUMNS = (
    "pk", "job_id", "organization", "tier", "project", "node", "gpu_indices", "started_at",
    "created_at", "time_limit_s", "expected_duration_s", "stop_requested", "stop_deadline",
    "last_checkpoint_at", "checkpointable", "preemptible", "preemptions", "submitted_by_id",
    "gpus", "project_id")
# What is read of it: names by id, filled in from read_names() at each load
_READ = (
    "pk", "job_id", "job__organization_id", "job__project_id", "node__name", "gpu_indices",
    "started_at", "created_at", "job__time_limit_s", "job__params__expected_duration_s",
    "stop_requested", "stop_deadline", "last_checkpoint_at", "job__checkpointable",
    "job__preemptible", "job__preemptions", "job__submitted_by_id", "job__gpus")
Row = tuple[Any, ...]


class LiveCache:
    """Live attempts' rows (_READ) by id, with the key each was read at."""

    def __init__(self) -> None:
        self.keys: dict[int, str] = {}
        self.rows: dict[int, Row] = {}
        self.server: object = None
        self.last_read = 0  # attempts read in full by the last load (tests and benches)

    def load(self) -> list[Row]:
        """Every live attempt (LIVE_COLUMNS), oldest first."""
        started = server_started()
        if started != self.server:  # transaction ids may have been handed out again
            self.keys, self.rows, self.server = {}, {}, started
        keys = _keys()
        seen = self.keys.get
        stale = [pk for pk, key in keys.items() if seen(pk) != key]
        fresh = {row[0]: row for row in _read(Attempt.objects.filter(pk__in=stale))
                 } if stale else {}
        rows = self.rows
        for pk in self.keys.keys() - keys.keys():
            del rows[pk]
        for pk in stale:  # one that ended between the two reads is not read: dropped
            rows.pop(pk, None)
            if pk not in fresh:
                del keys[pk]
        rows.update(fresh)
        self.keys, self.last_read = keys, len(fresh)
        return _named([rows[pk] for pk in sorted(keys)])


def live_attempts() -> list[Row]:
    """Every live attempt's row (LIVE_COLUMNS), from this process's cache where it may
    serve."""
    if connection.vendor != "postgresql" or connection.in_atomic_block:
        return _named(list(_read(Attempt.objects.filter(ended_at__isnull=True)
                                 .order_by("pk"))))
    return shared_cache().load()


_shared: dict[str, LiveCache] = {}


def shared_cache() -> LiveCache:
    """This process's cache of the live attempts of the database it is connected to."""
    name = connection.settings_dict["NAME"]
    if name not in _shared:
        _shared[name] = LiveCache()
    return _shared[name]


def _keys() -> dict[int, str]:
    """Each live attempt's key as one text, which the database writes faster than Python
    reads three timestamps."""
    attempts, jobs = Attempt._meta.db_table, Job._meta.db_table
    with connection.cursor() as cur:
        cur.execute(
            # concat writes a NULL as nothing, in its place: no two keys read alike
            f"SELECT a.id, concat(a.token, '|', a.started_at, '|', a.stop_requested, '|', "
            f"a.stop_deadline, '|', a.last_checkpoint_at, '|', j.xmin) FROM {attempts} a "
            f"JOIN {jobs} j ON j.id = a.job_id "
            f"WHERE a.ended_at IS NULL AND a.gpus_freed_at IS NULL")
        return dict(cur.fetchall())


def _read(attempts: QuerySet[Attempt]) -> QuerySet:
    """Attempts that hold GPUs: live, and not one that freed them before its report."""
    return attempts.filter(ended_at__isnull=True, gpus_freed_at__isnull=True).values_list(
        *_READ)


def _named(rows: list[Row]) -> list[Row]:
    """The rows with their organization, tier and project names (LIVE_COLUMNS); an attempt
    whose organization or project was deleted since it was read goes with them."""
    orgs, projects = read_names()
    return [(pk, job, *orgs[org], projects[project], *rest, project)
            for pk, job, org, project, *rest in rows
            if org in orgs and project in projects]

