"""Delete the copies of outputs that no job names: `manage.py outputs_sweep [--dry-run]`."""

from __future__ import annotations

from django.core.management.base import BaseCommand

from jobs.services.output_strays import outputs_sweep


class Command(BaseCommand):
    help = ("Delete the files in the outputs' folders of ended jobs that the jobs do not name "
            "(copies left by reports cut off before they committed).")

    def add_arguments(self, parser):
        parser.add_argument("--dry-run", action="store_true", help="list them, delete nothing")

    def handle(self, *args, **opts):
        found = outputs_sweep(delete=not opts["dry_run"])
        for name in found:
            self.stdout.write(name)
        done = "would delete" if opts["dry_run"] else "deleted"
        self.stdout.write(f"{done} {len(found)} file(s) no job names")
