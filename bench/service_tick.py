"""Time one scheduler tick of the service on a real database, phase by phase.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/gpusched_bench \
        python bench/service_tick.py [--nodes 200] [--queued 20000] [--rounds 3] [--history 0]

Fills the database (it must be a scratch one: its jobs and nodes are replaced) with nodes of
8 GPUs, a full fleet of running 1-GPU attempts and a queue, then times the snapshot load, the
policy and the commit of several ticks, and the same snapshot under `fifo` for the ratio.
The queue is also read alone, from the tick's cache (jobs/scheduler/queue_cache.py; the
first round fills it) and afresh as the tick read it before the cache, for that ratio; and
the last round's pending reasons are written again with and without what the cache says the
rows hold. The live attempts are read alone too, from their cache (live_cache.py) after
every running attempt's row is rewritten (as heartbeats do) and afresh.
`--history N` adds N attempts that ended over the last 40 hours (a fleet of 500 GPUs running
video jobs ends about 5,000 an hour): the tick folds them into the usage accounts once, then
reads the accounts; the baseline is the sum over every recent attempt that the tick computed
before, timed on the same database.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "gpusched.settings")


def _fill(nodes: int, queued: int, history: int = 0) -> None:
    from django.utils import timezone

    from jobs.fencing import next_token
    from jobs.models import Attempt, GpuBinding, Job, Organization, Project
    from jobs.services.tenancy import organization_create, tiers_ensure_defaults
    from tests.support.factories import make_node
    from workers.models import Gpu, Node

    now = timezone.now()
    GpuBinding.objects.update(released_at=now)  # the database keeps live ones
    GpuBinding.objects.all().delete()
    Attempt.objects.all().delete()
    Job.objects.all().delete()
    Node.objects.all().delete()
    Project.objects.all().delete()
    Organization.objects.all().delete()
    tiers_ensure_defaults()
    orgs = [organization_create(slug=f"org{i}", tier=("enterprise", "paid", "free")[i % 3])
            for i in range(30)]
    for i in range(nodes):
        make_node(f"n{i:04d}", gpus=8)
    spec = dict(prompt="bench", gpus=1, time_limit_s=3600, enqueued_at=now)
    running = Job.objects.bulk_create(
        [Job(organization=orgs[i % 30], project=orgs[i % 30].projects.first(), state="RUNNING",
             **spec) for i in range(nodes * 8)])
    gpus = list(Gpu.objects.select_related("node"))
    attempts = Attempt.objects.bulk_create(
        [Attempt(job=j, node=g.node, gpu_indices=[g.index], token=next_token(),
                 status="RUNNING", started_at=now, lease_expires_at=now.replace(year=2100))
         for j, g in zip(running, gpus, strict=True)])
    GpuBinding.objects.bulk_create(
        [GpuBinding(gpu=g, attempt=a) for g, a in zip(gpus, attempts, strict=True)])
    Job.objects.bulk_create(
        [Job(organization=orgs[i % 30], project=orgs[i % 30].projects.first(),
             **{**spec, "gpus": (1, 2, 4, 8)[i % 4]}) for i in range(queued)], batch_size=2000)
    _fill_history(history, orgs, gpus[0].node, now)
    from django.db import connection

    if connection.vendor == "postgresql":  # as autovacuum would after such a load
        with connection.cursor() as cursor:
            cursor.execute("ANALYZE")
    # the nodes heartbeat as live ones do: a long fill must not leave them stale
    Node.objects.update(last_heartbeat=timezone.now())


def _fill_history(count: int, orgs, node, now) -> None:
    """`count` finished jobs of one attempt each, ended over the last 40 hours."""
    import random
    from datetime import timedelta

    from jobs.models import Attempt, Job

    rng = random.Random(7)
    projects = [org.projects.first() for org in orgs]
    for first in range(0, count, 10_000):
        size = min(10_000, count - first)
        done = Job.objects.bulk_create(
            [Job(organization=orgs[i % 30], project=projects[i % 30],
                 state="SUCCEEDED", prompt="bench", gpus=1, time_limit_s=3600, enqueued_at=now)
             for i in range(size)])
        ends = [now - timedelta(seconds=rng.uniform(0, 40 * 3600)) for _ in done]
        # negative tokens: the fencing sequence never hands them out, and one call a row
        # would dominate the fill
        Attempt.objects.bulk_create(
            [Attempt(job=j, node=node, gpu_indices=[rng.randrange(8)], token=-(first + i + 1),
                     status="ENDED", outcome="SUCCEEDED", ended_at=end,
                     started_at=end - timedelta(seconds=rng.uniform(20, 600)))
             for i, (j, end) in enumerate(zip(done, ends, strict=True))])


def _scan_usage(now, half_life_s: float) -> dict[str, float]:
    """The baseline: decayed usage summed over every attempt of the last six half-lives."""
    import math
    from datetime import timedelta

    from django.db.models import Q

    from jobs.models import Attempt

    horizon = now - timedelta(seconds=6 * half_life_s)
    usage: dict[str, float] = {}
    for org, gpus, started, ended in Attempt.objects.filter(
        Q(ended_at__isnull=True) | Q(ended_at__gte=horizon), started_at__isnull=False
    ).values_list("job__organization__slug", "gpu_indices", "started_at", "ended_at"):
        end = ended or now
        used = len(gpus) * (end - started).total_seconds()
        usage[org] = usage.get(org, 0.0) + used * math.pow(
            0.5, (now - end).total_seconds() / half_life_s)
    return usage


def _timed(fn):
    started = time.perf_counter()
    value = fn()
    return value, (time.perf_counter() - started) * 1000


def _time_usage() -> None:
    from django.conf import settings
    from django.utils import timezone

    from jobs.scheduler.usage import fold_ended_attempts, load_usage

    half_life = settings.GPUSCHED_USAGE_HALF_LIFE_S
    now = timezone.now()
    _, backlog_ms = _timed(lambda: _fold_all(now, half_life, fold_ended_attempts))
    print(f"first fold of the whole history (once, after an upgrade): {backlog_ms:.0f} ms")
    reads, scans = [], []
    for _ in range(3):
        now = timezone.now()
        reads.append(_timed(lambda now=now: load_usage(now, half_life))[1])
        scans.append(_timed(lambda now=now: _scan_usage(now, half_life))[1])
    read, scan = statistics.median(reads), statistics.median(scans)
    print(f"usage read: accounts {read:.1f} ms, scan of recent attempts {scan:.0f} ms, "
          f"ratio {read / scan:.3f}")


def _fold_all(now, half_life, fold) -> None:
    while fold(now, half_life):
        pass


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=200)
    parser.add_argument("--queued", type=int, default=20_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--history", type=int, default=0)
    args = parser.parse_args()

    import django

    django.setup()
    from django.core.management import call_command

    from jobs.scheduler.snapshot import policy_config

    call_command("migrate", verbosity=0)
    _fill(args.nodes, args.queued, args.history)
    print(f"{args.nodes} nodes x 8 GPUs, all busy; {args.queued} queued; "
          f"{args.history} attempts ended in the last 40 h")
    if args.history:
        _time_usage()
    print("round  load_ms  queue_ms  rows_read  fresh_queue_ms  gpusched_ms  fifo_ms  ratio  "
          "commit_ms  reasons_written")
    limit_weight = policy_config().limit_weight
    rounds = [_round(r, limit_weight) for r in range(args.rounds)]
    loads, decides, queues, freshes = zip(*(r[:4] for r in rounds), strict=True)
    queue, fresh = statistics.median(queues[1:] or queues), statistics.median(freshes)
    print(f"median snapshot load {statistics.median(loads[1:] or loads):.0f} ms after the "
          f"first ({loads[0]:.0f} ms), median decision {statistics.median(decides):.1f} ms")
    print(f"queue read: cached {queue:.0f} ms, fresh {fresh:.0f} ms, ratio {queue / fresh:.2f}")
    _time_live()
    _time_reasons(rounds[-1][4])
    _time_line(rounds[-1][5], rounds[-1][4])
    _time_run_times(limit_weight)


def _round(r: int, limit_weight: float) -> tuple:
    """One tick, phase by phase; returns its timings and its decisions."""
    from django.utils import timezone

    from jobs import policy
    from jobs.scheduler.apply import apply_decisions
    from jobs.scheduler.queue_cache import QueueCache, held_reasons, queued_jobs, shared_cache
    from jobs.scheduler.snapshot import load_snapshot

    now = timezone.now()
    snap, load_ms = _timed(lambda: load_snapshot(now))
    read = shared_cache().last_read  # rows the load read: those changed since the last
    # the queue alone, from the tick's cache (nothing changed since) and read afresh
    _, queue_ms = _timed(lambda: queued_jobs(limit_weight))
    _, fresh_ms = _timed(lambda: QueueCache(versioned=False).load(limit_weight))
    decisions, decide_ms = _timed(lambda: policy.decide(snap))
    _, fifo_ms = _timed(lambda: policy.fifo_decide(snap))
    report, commit_ms = _timed(lambda: apply_decisions(decisions, now, held=held_reasons()))
    print(f"{r:5d}  {load_ms:7.0f}  {queue_ms:8.0f}  {read:9d}  {fresh_ms:14.0f}  "
          f"{decide_ms:11.1f}  {fifo_ms:7.1f}  {decide_ms / fifo_ms:5.2f}  "
          f"{commit_ms:9.0f}  {report.reasons_written:15d}")
    return load_ms, decide_ms, queue_ms, fresh_ms, decisions, snap


def _time_live(runs: int = 9) -> None:
    """The live attempts read from the tick's cache, nothing changed but heartbeats (each
    running attempt's row rewritten), and afresh with the query the tick used before."""
    from django.db.models import F

    from jobs.models import Attempt
    from jobs.scheduler.live_cache import LiveCache, _named, _read

    cache = LiveCache()
    cache.load()
    cached, fresh = [], []
    for _ in range(runs):
        Attempt.objects.filter(ended_at__isnull=True).update(progress=F("progress") + 0.001)
        cached.append(_timed(cache.load)[1])
        fresh.append(_timed(lambda: _named(list(_read(Attempt.objects.order_by("pk")))))[1])
    c, f = statistics.median(cached), statistics.median(fresh)
    print(f"live attempts read ({len(cache.keys)}; every row rewritten between reads, as "
          f"heartbeats do): cached {c:.0f} ms ({cache.last_read} read again), fresh {f:.0f} "
          f"ms, ratio {c / f:.2f}")


def _time_reasons(decisions) -> None:
    """The last round's reasons written again, alternately: left out where the queue cache
    says the row holds them, and every job sent for SQL to compare (the writer before)."""
    from django.utils import timezone

    from jobs.scheduler.queue_cache import held_reasons
    from jobs.scheduler.reasons import write_reasons
    from jobs.scheduler.snapshot import load_snapshot

    load_snapshot(timezone.now())  # the cache reads back the rows the last commit wrote
    held, compared = [], []
    for _ in range(5):
        held.append(_timed(lambda: write_reasons(decisions.pending, held=held_reasons()))[1])
        compared.append(_timed(lambda: write_reasons(decisions.pending))[1])
    h, c = statistics.median(held), statistics.median(compared)
    print(f"reasons write (nothing to change): held {h:.0f} ms, all compared in SQL {c:.0f} ms, "
          f"ratio {h / c:.2f}")


def _time_line(snap, decisions) -> None:
    """Queue positions (jobs/scheduler/positions.py) of the last round's snapshot: the line
    drawn alone, drawn and published in the cache, and read back for one job and for a page
    of 100; against the round's decision on the same snapshot."""
    from jobs import policy
    from jobs.policy.line import start_order
    from jobs.scheduler.positions import publish_positions, queue_positions

    placed = {p.job_id for p in decisions.placements}
    draws, publishes, decides, ones, pages = [], [], [], [], []
    page = [j.job_id for j in snap.queued[-100:]]
    for _ in range(3):
        decides.append(_timed(lambda: policy.decide(snap))[1])
        draws.append(_timed(lambda: start_order(snap))[1])
        publishes.append(_timed(lambda: publish_positions(snap, placed))[1])
        ones.append(_timed(lambda: queue_positions(page[:1]))[1])
        pages.append(_timed(lambda: queue_positions(page))[1])
    draw, publish, decide = (statistics.median(x) for x in (draws, publishes, decides))
    print(f"queue line: drawn {draw:.0f} ms, drawn and published {publish:.0f} ms "
          f"(decision {decide:.0f} ms, ratio {publish / decide:.2f}); read one job "
          f"{statistics.median(ones):.2f} ms, a page of 100 {statistics.median(pages):.2f} ms")


def _time_run_times(limit_weight: float) -> None:
    """Learned run times (jobs/scheduler/runtimes.py): their read, and the cached queue's
    load when every one moved since the last tick (each job without an estimate takes its
    new value) against one where none did."""
    from jobs.scheduler.queue_cache import queued_jobs
    from jobs.scheduler.runtimes import load_run_times

    learned, read_ms = _timed(load_run_times)
    queued_jobs(limit_weight, learned)
    moved, still = [], []
    for i in range(5):
        shifted = {key: value * (1.01 + i / 100) for key, value in learned.items()}
        moved.append(_timed(lambda s=shifted: queued_jobs(limit_weight, s))[1])
        still.append(_timed(lambda s=shifted: queued_jobs(limit_weight, s))[1])
    jobs = sum(1 for job in queued_jobs(limit_weight, learned)
               if job.expected_duration_s is not None)
    print(f"learned run times: {len(learned)} read in {read_ms:.1f} ms; {jobs} queued jobs with "
          f"a run time; queue load with all moved {statistics.median(moved):.0f} ms, "
          f"none moved {statistics.median(still):.0f} ms")


if __name__ == "__main__":
    main()
