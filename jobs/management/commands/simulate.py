"""`python manage.py simulate ...`: the scheduling simulator (options of `python -m jobs.sim`).

From code, the simulator's options follow a `--`: `call_command("simulate", "--", "--trace",
"video")`.
"""

import argparse

from django.core.management.base import BaseCommand, CommandError


class Command(BaseCommand):
    help = "Replay a workload through scheduling policies in virtual time (see docs/simulator.md)."

    def create_parser(self, prog_name, subcommand, **kwargs):
        # no abbreviations: `--trace` was read as Django's `--traceback`, the rest went on
        return super().create_parser(prog_name, subcommand, allow_abbrev=False, **kwargs)

    def add_arguments(self, parser):
        parser.add_argument("sim_args", nargs=argparse.REMAINDER,
                            help="-- then options of python -m jobs.sim (--trace, --policy, ...)")

    def run_from_argv(self, argv):
        # Forward everything after the command name untouched, so --help is the simulator's.
        from jobs.sim.cli import main

        raise SystemExit(main(argv[2:]))

    def handle(self, *args, **options):
        from jobs.sim.cli import main

        sim_args = list(options.get("sim_args") or args)
        if sim_args[:1] == ["--"]:
            sim_args = sim_args[1:]
        rc = main(sim_args)
        if rc:
            raise CommandError(f"simulator exited with {rc}")
