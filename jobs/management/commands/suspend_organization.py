"""Suspend an organization, or resume it, from a script (a billing system's, say):
`manage.py suspend_organization acme --reason "invoice 7 unpaid"`, `... acme --resume`."""

from __future__ import annotations

from django.core.management.base import BaseCommand, CommandError

from jobs.models import Organization
from jobs.services.errors import ServiceError
from jobs.services.suspension import organization_resume, organization_suspend


class Command(BaseCommand):
    help = "Suspend an organization (no new job accepted or started) or resume it."

    def add_arguments(self, parser):
        parser.add_argument("organization", help="the organization's slug")
        what = parser.add_mutually_exclusive_group(required=True)
        what.add_argument("--reason", help="suspend it, saying why (its clients read it)")
        what.add_argument("--resume", action="store_true", help="resume it")

    def handle(self, *args, **opts):
        org = Organization.objects.filter(slug=opts["organization"]).first()
        if org is None:
            raise CommandError(f"no organization {opts['organization']!r}")
        if opts["resume"]:
            done = organization_resume(organization=org, by=None)
            self.stdout.write(f"{org.slug} is resumed" if done else f"{org.slug} was not "
                                                                    f"suspended")
            return
        try:
            done = organization_suspend(organization=org, reason=opts["reason"], by=None)
        except ServiceError as exc:
            raise CommandError(exc.message) from exc
        self.stdout.write(f"{org.slug} is suspended" if done else
                          f"{org.slug} was suspended already")
