"""Give an organization credits: `manage.py grant_credits acme 100000 [--promo --days 30]`."""

from __future__ import annotations

from datetime import timedelta

from django.core.management.base import BaseCommand, CommandError
from django.utils import timezone

from credits.models import Transfer
from credits.services.grants import credits_grant, grant_key
from credits.services.statements import organization_balance
from jobs.models import Organization
from jobs.services.errors import ServiceError


class Command(BaseCommand):
    help = "Grant credits to an organization (a transfer from system:issuance)."

    def add_arguments(self, parser):
        parser.add_argument("organization", help="the organization's slug")
        parser.add_argument("amount", type=int)
        parser.add_argument("--promo", action="store_true", help="a promotional bucket")
        parser.add_argument("--days", type=float, help="promotional credits expire after")
        parser.add_argument("--key", default="", help="idempotency key (e.g. an invoice id)")
        parser.add_argument("--memo", default="")

    def handle(self, *args, **opts):
        org = Organization.objects.filter(slug=opts["organization"]).first()
        if org is None:
            raise CommandError(f"no organization {opts['organization']!r}")
        expires = timezone.now() + timedelta(days=opts["days"]) if opts["days"] else None
        try:
            credits_grant(organization=org, amount=opts["amount"], promo=opts["promo"],
                          expires_at=expires, idempotency_key=_key(org, opts["key"]),
                          memo=opts["memo"])
        except ServiceError as exc:
            raise CommandError(exc.message) from exc
        balance = organization_balance(org)
        self.stdout.write(f"{org.slug}: {balance['available']} available, "
                          f"{balance['held']} held")


def _key(org: Organization, key: str) -> str:
    """The grant's key as admin records it too; the key itself for an invoice this command
    granted before keys named their organization, so that running it again grants nothing."""
    granted_before = key and Transfer.objects.filter(idempotency_key=key,
                                                     kind=Transfer.Kind.GRANT).exists()
    return key if granted_before else grant_key(org, key)
