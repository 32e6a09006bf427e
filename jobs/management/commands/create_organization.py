"""Onboard an organization from a script (a sign-up or billing system's, say):

    manage.py create_organization acme --tier paid --invite-owner --key ci

makes it with its default project, and prints, each once, the link its first owner opens to
make their account and own it (a week, as an owner's invitation) and an API key for its
clients. Its credits: `manage.py grant_credits`. A slug that exists is refused, nothing made.
"""

from __future__ import annotations

from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError
from django.core.validators import validate_slug
from django.db import IntegrityError, transaction
from django.urls import reverse

from jobs.models import ApiKey, Membership, Tier
from jobs.services.invitations import invitation_create
from jobs.services.tenancy import api_key_issue, organization_create


class Command(BaseCommand):
    help = "Make an organization; print its first owner's invitation link and a key, once."

    def add_arguments(self, parser):
        parser.add_argument("slug", help="its name in URLs and the API, e.g. acme")
        parser.add_argument("--tier", required=True, help="enterprise, paid, free, or one an "
                                                          "operator added")
        parser.add_argument("--name", default="", help="how people read it (default: slug)")
        parser.add_argument("--invite-owner", action="store_true",
                            help="print a one-time link that makes its first owner")
        parser.add_argument("--key", metavar="NAME", help="issue an API key of this name")
        parser.add_argument("--scope", default=ApiKey.Scope.FULL, choices=ApiKey.Scope.values,
                            help="the key's scope (default: full)")
        parser.add_argument("--url", default="", help="the dashboard's address, to print the "
                                                      "whole link (e.g. https://gpus.example)")

    def handle(self, *args, **opts):
        try:
            validate_slug(opts["slug"])
        except ValidationError:
            raise CommandError("a slug is letters, digits, '_' or '-'") from None
        if opts["key"] is not None and not 1 <= len(opts["key"].strip()) <= 80:
            raise CommandError("a key's name is 1 to 80 characters")
        if not Tier.objects.filter(name=opts["tier"]).exists():
            tiers = ", ".join(Tier.objects.order_by("-priority").values_list("name", flat=True))
            raise CommandError(f"no tier {opts['tier']!r}; the tiers are {tiers}")
        try:
            with transaction.atomic():
                org = organization_create(slug=opts["slug"], tier=opts["tier"],
                                          name=opts["name"])
                invited = invitation_create(organization=org, role=Membership.Role.OWNER,
                                            by_operator=True)[1] if opts["invite_owner"] else None
                key = api_key_issue(organization=org, name=opts["key"].strip(),
                                    scope=opts["scope"])[1] if opts["key"] else None
        except IntegrityError:
            raise CommandError(f"an organization {opts['slug']!r} exists already") from None
        self.stdout.write(f"{org.slug} ({org.tier.name}) is made")
        if invited:
            link = opts["url"].rstrip("/") + reverse("dashboard-join", args=[invited])
            self.stdout.write(f"owner's invitation (once; a week): {link}")
        if key:
            self.stdout.write(f"API key {opts['key']} ({opts['scope']}; once): {key}")
