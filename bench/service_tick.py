"""Time one scheduler tick of the service on a real database, phase by phase.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/gpusched_bench \
        python bench/service_tick.py [--nodes 200] [--queued 20000] [--rounds 3]

Fills the database (it must be a scratch one: its jobs and nodes are replaced) with nodes of
8 GPUs, a full fleet of running 1-GPU attempts and a queue, then times the snapshot load, the
policy and the commit of several ticks, and the same snapshot under `fifo` for the ratio.
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


def _fill(nodes: int, queued: int) -> None:
    from django.utils import timezone

    from jobs.fencing import next_token
    from jobs.models import Attempt, GpuBinding, Job, Organization, Project
    from jobs.services.tenancy import organization_create, tiers_ensure_defaults
    from tests.support.factories import make_node
    from workers.models import Gpu, Node

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
    now = timezone.now()
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


def _timed(fn):
    started = time.perf_counter()
    value = fn()
    return value, (time.perf_counter() - started) * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=200)
    parser.add_argument("--queued", type=int, default=20_000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()

    import django

    django.setup()
    from django.core.management import call_command
    from django.utils import timezone

    from jobs import policy
    from jobs.scheduler.apply import apply_decisions
    from jobs.scheduler.snapshot import load_snapshot

    call_command("migrate", verbosity=0)
    _fill(args.nodes, args.queued)
    print(f"{args.nodes} nodes x 8 GPUs, all busy; {args.queued} queued")
    print("round  load_ms  gpusched_ms  fifo_ms  ratio  commit_ms  reasons_written")
    loads, decides = [], []
    for r in range(args.rounds):
        now = timezone.now()
        snap, load_ms = _timed(lambda now=now: load_snapshot(now))
        decisions, decide_ms = _timed(lambda snap=snap: policy.decide(snap))
        _, fifo_ms = _timed(lambda snap=snap: policy.fifo_decide(snap))
        report, commit_ms = _timed(lambda d=decisions, now=now: apply_decisions(d, now))
        loads.append(load_ms)
        decides.append(decide_ms)
        print(f"{r:5d}  {load_ms:7.0f}  {decide_ms:11.1f}  {fifo_ms:7.1f}  "
              f"{decide_ms / fifo_ms:5.2f}  {commit_ms:9.0f}  {report.reasons_written:15d}")
    print(f"median snapshot load {statistics.median(loads):.0f} ms, "
          f"median decision {statistics.median(decides):.1f} ms")


if __name__ == "__main__":
    main()
