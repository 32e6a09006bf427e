"""Dedicate nodes to an organization, or share them again, from a script (a contract for
reserved capacity signed in a billing system, say): `manage.py node_dedicate n17 n18 --org
acme [--at 2026-12-08T09:00Z] [--hours 72] [--evacuate]`, `... n17 n18 --shared`
(docs/nodes.md, "Dedicated nodes")."""

from __future__ import annotations

from django.core.management.base import BaseCommand, CommandError
from django.utils import timezone

from jobs.models import Organization
from jobs.services.errors import ServiceError
from workers.management.arguments import hours_after, nodes_named, when
from workers.services.dedication import nodes_dedicate


class Command(BaseCommand):
    help = "Dedicate nodes to an organization (only its jobs start there) or share them again."

    def add_arguments(self, parser):
        parser.add_argument("nodes", nargs="+", help="the nodes' names")
        whose = parser.add_mutually_exclusive_group(required=True)
        whose.add_argument("--org", help="the organization's slug")
        whose.add_argument("--shared", action="store_true", help="every organization's again")
        parser.add_argument("--at", help="with --org: when it begins, ISO 8601 (UTC unless it "
                                         "says); till then others' jobs must end by then")
        parser.add_argument("--hours", type=float,
                            help="with --org: how long it lasts; then the nodes are shared "
                                 "again by themselves (without it: until --shared)")
        parser.add_argument("--evacuate", action="store_true",
                            help="with --org, beginning now: other organizations' running "
                                 "jobs checkpoint and move now (else they finish there)")

    def handle(self, *args, **opts):
        nodes = nodes_named(opts["nodes"])
        org = None
        if opts["org"]:
            org = Organization.objects.filter(slug=opts["org"]).first()
            if org is None:
                raise CommandError(f"no organization {opts['org']}: nothing changed")
        at = when(opts["at"]) if opts["at"] else None
        until = hours_after(at or timezone.now(), opts["hours"])
        try:
            asked = nodes_dedicate(nodes, org, at=at, until=until, evacuate=opts["evacuate"])
        except ServiceError as exc:
            raise CommandError(f"{exc.message}: nothing changed") from None
        names = ", ".join(sorted(n.name for n in nodes))
        moved = f"; {asked} running job(s) of others asked to move" if asked else ""
        span = (f" from {at.isoformat()}" if at else "") + (
            f" until {until.isoformat()}" if until else "")
        self.stdout.write(f"{names}: shared by every organization" if org is None else
                          f"{names}: dedicated to {org.slug}{span}{moved}")
