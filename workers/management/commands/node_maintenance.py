"""Set or clear nodes' maintenance windows from a script (a rack's power work planned in a
ticket system, say): `manage.py node_maintenance n17 n18 --at 2026-12-04T14:00Z [--hours 4]`,
`... n17 n18 --done` (docs/nodes.md, "Maintenance windows")."""

from __future__ import annotations

from django.core.management.base import BaseCommand

from workers.management.arguments import hours_after, nodes_named, when
from workers.services.fleet import node_schedule_maintenance


class Command(BaseCommand):
    help = "Schedule nodes' maintenance (they start only jobs that end before it) or end it."

    def add_arguments(self, parser):
        parser.add_argument("nodes", nargs="+", help="the nodes' names")
        what = parser.add_mutually_exclusive_group(required=True)
        what.add_argument("--at", help="when the work begins, ISO 8601 (UTC unless it says)")
        what.add_argument("--done", action="store_true", help="end it: clear the window")
        parser.add_argument("--hours", type=float,
                            help="with --at: how long it lasts; then the nodes take work again "
                                 "by themselves (without it: until --done)")

    def handle(self, *args, **opts):
        nodes = nodes_named(opts["nodes"])
        at = None if opts["done"] else when(opts["at"])
        until = hours_after(at, opts["hours"])
        for node in nodes:
            node_schedule_maintenance(node, at, until)
        names = ", ".join(sorted(n.name for n in nodes))
        back = f", back at {until.isoformat()}" if until else ""
        self.stdout.write(f"{names}: no maintenance window" if at is None else
                          f"{names}: leave service at {at.isoformat()}{back}")

