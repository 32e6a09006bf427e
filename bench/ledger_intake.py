"""What the credit ledger costs intake: submissions and cancellations a second, with GPU
prices set (every job holds credits, every end settles them) against the same work without
prices (no ledger work), measured in the same run, alternated round by round.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/gpusched_bench \
        python bench/ledger_intake.py [--threads 4] [--jobs 200] [--orgs 8] [--rounds 3]

The database must be a scratch one: it is emptied first. Each thread submits `--jobs` jobs
for organizations drawn at random (every submission locks its organization; every hold and
void updates the one system:usage account), then the same threads cancel them (settlement:
the hold voided). Prints each round and the median ratio priced / free.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "gpusched.settings")


def _in_threads(work, threads: int) -> float:
    """Run work(i) in `threads` threads started together; seconds until all are done."""
    from django.db import connection

    barrier = threading.Barrier(threads + 1)

    def body(i: int) -> None:
        barrier.wait()
        try:
            work(i)
        finally:
            connection.close()

    pool = [threading.Thread(target=body, args=(i,)) for i in range(threads)]
    for t in pool:
        t.start()
    barrier.wait()
    started = time.perf_counter()
    for t in pool:
        t.join()
    return time.perf_counter() - started


def _round(orgs, threads: int, jobs: int, priced: bool) -> tuple[float, float]:
    from credits.models import GpuPrice
    from jobs.services.cancellation import job_cancel
    from jobs.services.submission import JobSpec, job_submit

    GpuPrice.objects.all().delete()
    if priced:
        GpuPrice.objects.create(gpu_type="H100", credits_per_gpu_hour=3600)
    made: list[list] = [[] for _ in range(threads)]

    def submit(i: int) -> None:
        rng = random.Random(i)
        for _ in range(jobs):
            made[i].append(job_submit(organization=rng.choice(orgs),
                                      spec=JobSpec(prompt="bench", time_limit_s=600)))

    def cancel(i: int) -> None:
        for job in made[i]:
            job_cancel(job=job)

    total = threads * jobs
    return total / _in_threads(submit, threads), total / _in_threads(cancel, threads)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=4)
    parser.add_argument("--jobs", type=int, default=200, help="per thread and round")
    parser.add_argument("--orgs", type=int, default=8)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()

    import django

    django.setup()
    from django.core.management import call_command

    from credits.services.audit import audit_ledger
    from credits.services.grants import credits_grant
    from jobs.services.tenancy import organization_create, tiers_ensure_defaults

    call_command("migrate", verbosity=0)
    call_command("flush", interactive=False, verbosity=0)
    tiers_ensure_defaults()
    orgs = [organization_create(slug=f"org{i}", tier="paid") for i in range(args.orgs)]
    for org in orgs:
        credits_grant(organization=org, amount=10**12)
    print(f"{args.threads} threads x {args.jobs} jobs a round, {args.orgs} organizations")
    print("round  free submit/s  priced submit/s  ratio  free cancel/s  priced cancel/s  ratio")
    sub_ratios, end_ratios = [], []
    for r in range(args.rounds):
        free = _round(orgs, args.threads, args.jobs, priced=False)
        priced = _round(orgs, args.threads, args.jobs, priced=True)
        sub_ratios.append(priced[0] / free[0])
        end_ratios.append(priced[1] / free[1])
        print(f"{r:5d}  {free[0]:13.0f}  {priced[0]:15.0f}  {sub_ratios[-1]:5.2f}  "
              f"{free[1]:13.0f}  {priced[1]:15.0f}  {end_ratios[-1]:5.2f}")
    problems = audit_ledger()
    print(f"median ratio priced / free: submit {statistics.median(sub_ratios):.2f}, "
          f"cancel {statistics.median(end_ratios):.2f}; ledger audit: "
          f"{'balanced' if not problems else problems[:3]}")


if __name__ == "__main__":
    main()
