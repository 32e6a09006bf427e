"""Check the credit ledger's books: `manage.py audit_ledger`; exit status 1 when they are off."""

from __future__ import annotations

from django.core.management.base import BaseCommand, CommandError

from credits.models import Transfer
from credits.services.audit import audit_ledger


class Command(BaseCommand):
    help = "Check every account and hold against its transfers, and the ledger against zero."

    def handle(self, *args, **opts):
        problems = audit_ledger()
        for problem in problems:
            self.stderr.write(problem)
        if problems:
            raise CommandError(f"{len(problems)} problem(s) in the ledger")
        self.stdout.write(f"the ledger balances: {Transfer.objects.count()} transfers checked")
