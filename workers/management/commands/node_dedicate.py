"""Dedicate nodes to an organization, or share them again, from a script (a contract for
reserved capacity signed in a billing system, say): `manage.py node_dedicate n17 n18 --org
acme [--evacuate]`, `... n17 n18 --shared` (docs/nodes.md, "Dedicated nodes")."""

from __future__ import annotations

from django.core.management.base import BaseCommand, CommandError

from jobs.models import Organization
from workers.models import Node
from workers.services.dedication import nodes_dedicate


class Command(BaseCommand):
    help = "Dedicate nodes to an organization (only its jobs start there) or share them again."

    def add_arguments(self, parser):
        parser.add_argument("nodes", nargs="+", help="the nodes' names")
        whose = parser.add_mutually_exclusive_group(required=True)
        whose.add_argument("--org", help="the organization's slug")
        whose.add_argument("--shared", action="store_true", help="every organization's again")
        parser.add_argument("--evacuate", action="store_true",
                            help="with --org: other organizations' running jobs checkpoint "
                                 "and move now (else they finish there)")

    def handle(self, *args, **opts):
        nodes = list(Node.objects.filter(name__in=opts["nodes"]))
        unknown = sorted(set(opts["nodes"]) - {n.name for n in nodes})
        if unknown:
            raise CommandError(f"no node {', '.join(unknown)}: nothing changed")
        org = None
        if opts["org"]:
            org = Organization.objects.filter(slug=opts["org"]).first()
            if org is None:
                raise CommandError(f"no organization {opts['org']}: nothing changed")
        asked = nodes_dedicate(nodes, org, evacuate=opts["evacuate"])
        names = ", ".join(sorted(n.name for n in nodes))
        moved = f"; {asked} running job(s) of others asked to move" if asked else ""
        self.stdout.write(f"{names}: shared by every organization" if org is None else
                          f"{names}: dedicated to {org.slug}{moved}")
