"""What an organization's reads cost once the service has a history: its latest credit
transfers, a budget's month and the dashboard's newest jobs, each as the service asks it now
against the same read without what serves it (the query as it was written before, or the
index dropped), measured in the same run on the same rows.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/gpusched_bench \
        python bench/org_queries.py [--orgs 1000] [--jobs 400000] [--repeat 15]

The database must be a scratch one: it is emptied first. One heavy organization has 30% of
the jobs, one quiet one five, the rest share what is left; each job has a hold and two
transfers (its hold and its void), made over the last year. Prints each read's median in
milliseconds and the ratio baseline / now.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "gpusched.settings")

BATCH = 5_000


def _median_ms(read: Callable[[], object], repeat: int) -> float:
    read()  # warm: plans and pages cached alike for both
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        read()
        times.append((time.perf_counter() - started) * 1000)
    return statistics.median(times)


def _fill(orgs: int, jobs: int) -> dict:
    """The history: organizations with a wallet and a project each, their jobs, holds and
    transfers."""
    from django.contrib.auth.models import User
    from django.db import connection
    from django.utils import timezone

    from credits.models import Account, Hold, Transfer
    from credits.services.ledger import USAGE, system_account
    from jobs.models import (
        Job,
        Membership,
        Organization,
        Project,
        Tier,
    )

    tier = Tier.objects.get_or_create(name="paid", defaults={"priority": 10})[0]
    made = Organization.objects.bulk_create(
        [Organization(name=f"org {i}", slug=f"org-{i}", tier=tier) for i in range(orgs)])
    projects = Project.objects.bulk_create(
        [Project(organization=o, name="default") for o in made])
    wallets = Account.objects.bulk_create(
        [Account(kind=Account.Kind.WALLET, organization=o, bucket=Account.Bucket.PAID)
         for o in made])
    usage = system_account(USAGE)
    heavy, quiet = 0, 1
    rng = random.Random(7)
    owners = [heavy if rng.random() < 0.3 else rng.randrange(2, orgs) for _ in range(jobs)]
    owners[:5] = [quiet] * 5
    for start in range(0, jobs, BATCH):
        chunk = owners[start:start + BATCH]
        now = timezone.now()
        live = [Job(organization=made[o], project=projects[o], prompt="a fox", gpus=1,
                    enqueued_at=now, time_limit_s=600,
                    state="QUEUED" if rng.random() < 0.01 else "SUCCEEDED")
                for o in chunk]
        Job.objects.bulk_create(live)
        holds = Hold.objects.bulk_create(
            [Hold(job=j, account=wallets[o], amount=600, voided=600, closed_at=j.created_at)
             for j, o in zip(live, chunk, strict=True)])
        Transfer.objects.bulk_create(
            [Transfer(kind=kind, debit=wallets[o], credit=usage, amount=600, hold=h, job=j)
             for j, h, o in zip(live, holds, chunk, strict=True)
             for kind in (Transfer.Kind.HOLD, Transfer.Kind.VOID)])
    with connection.cursor() as cursor:  # a year of history, not one minute's
        cursor.execute("UPDATE jobs_job SET created_at = now() - random() * interval '365 "
                       "days' WHERE id > (SELECT min(id) + 4 FROM jobs_job)")
        # the ledger refuses updates (a trigger): let this history be written once
        cursor.execute("ALTER TABLE credits_transfer DISABLE TRIGGER USER")
        cursor.execute("UPDATE credits_transfer SET created_at = j.created_at FROM jobs_job j "
                       "WHERE j.id = credits_transfer.job_id")
        cursor.execute("ALTER TABLE credits_transfer ENABLE TRIGGER USER")
    people = {}
    for name, org in (("heavy", heavy), ("quiet", quiet)):
        people[name] = User.objects.create_user(f"{name}-user")
        Membership.objects.create(user=people[name], organization=made[org])
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE")
    return {"heavy": made[heavy], "quiet": made[quiet], "people": people}


def _without_index(name: str, read: Callable[[], object], repeat: int) -> float:
    """`read` timed with index `name` dropped (and put back after)."""
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("SELECT indexdef FROM pg_indexes WHERE indexname = %s", [name])
        (definition,) = cursor.fetchone()
        cursor.execute(f'DROP INDEX "{name}"')
        cursor.execute("ANALYZE")
    try:
        return _median_ms(read, repeat)
    finally:
        with connection.cursor() as cursor:
            cursor.execute(definition)
            cursor.execute("ANALYZE")


def _reads(made: dict) -> list[tuple[str, Callable, Callable | str]]:
    """(what, the read now, its baseline: a read as it was, or the index it needs)."""
    from django.utils import timezone

    from credits.models import Budget, Transfer
    from credits.services.budgets import committed, month_start
    from credits.services.statements import recent_transfers
    from jobs.models import Job, Organization

    budget = Budget.objects.create(organization=made["heavy"], monthly_limit=10**12)
    since = month_start(timezone.now())

    def transfers_before(org):  # the join on the accounts, as the service asked it before
        mine = (Transfer.objects.filter(debit__organization=org)
                | Transfer.objects.filter(credit__organization=org))
        return list(mine.select_related("debit", "credit").order_by("-id")[:50])

    def newest_now(user):
        mine = list(Organization.objects.filter(memberships__user=user).values_list(
            "pk", flat=True))
        return list(Job.objects.filter(organization_id__in=mine).order_by("-pk")[:101])

    def newest_before(user):
        return list(Job.objects.filter(organization__memberships__user=user)
                    .order_by("-pk")[:101])

    people = made["people"]
    return [
        ("latest transfers, quiet organization", lambda: list(recent_transfers(made["quiet"])),
         lambda: transfers_before(made["quiet"])),
        ("latest transfers, heavy organization", lambda: list(recent_transfers(made["heavy"])),
         lambda: transfers_before(made["heavy"])),
        ("a budget's month, heavy organization", lambda: committed(budget, since=since),
         "job_org_month_idx"),
        ("dashboard's newest jobs, quiet member", lambda: newest_now(people["quiet"]),
         lambda: newest_before(people["quiet"])),
        ("dashboard's newest jobs, heavy member", lambda: newest_now(people["heavy"]),
         lambda: newest_before(people["heavy"])),
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--orgs", type=int, default=1000)
    parser.add_argument("--jobs", type=int, default=400_000)
    parser.add_argument("--repeat", type=int, default=15)
    args = parser.parse_args()

    import django

    django.setup()
    from django.core.management import call_command

    call_command("flush", interactive=False, verbosity=0)
    started = time.perf_counter()
    made = _fill(args.orgs, args.jobs)
    print(f"{args.jobs:,} jobs of {args.orgs:,} organizations, {2 * args.jobs:,} transfers, "
          f"made in {time.perf_counter() - started:.0f} s")
    print(f"{'read':44} {'now ms':>9} {'before ms':>10} {'ratio':>8}")
    for what, now, before in _reads(made):
        after_ms = _median_ms(now, args.repeat)
        before_ms = (_without_index(before, now, args.repeat) if isinstance(before, str)
                     else _median_ms(before, args.repeat))
        print(f"{what:44} {after_ms:9.2f} {before_ms:10.2f} {before_ms / after_ms:7.1f}x")


if __name__ == "__main__":
    main()
