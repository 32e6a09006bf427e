"""`python manage.py simulate ...`: the scheduling simulator (options of `python -m jobs.sim`)."""

import argparse

from django.core.management.base import BaseCommand, CommandError


class Command(BaseCommand):
    help = "Replay a workload through scheduling policies in virtual time (see docs/simulator.md)."

    def add_arguments(self, parser):
        parser.add_argument("sim_args", nargs=argparse.REMAINDER,
                            help="options of python -m jobs.sim (--trace, --policy, ...)")

    def run_from_argv(self, argv):
        # Forward everything after the command name untouched, so --help is the simulator's.
        from jobs.sim.cli import main

        raise SystemExit(main(argv[2:]))

    def handle(self, *args, **options):
        from jobs.sim.cli import main

        rc = main(list(options.get("sim_args") or args))
        if rc:
            raise CommandError(f"simulator exited with {rc}")
