"""What the fleet's commands take: nodes by name, a start in ISO 8601 (UTC unless it says)
and a length in hours after it."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from django.core.management.base import CommandError
from django.utils.dateparse import parse_datetime

from workers.models import Node


def nodes_named(names: list[str]) -> list[Node]:
    """The nodes named, or a refusal naming those that do not exist."""
    nodes = list(Node.objects.filter(name__in=names))
    unknown = sorted(set(names) - {n.name for n in nodes})
    if unknown:
        raise CommandError(f"no node {', '.join(unknown)}: nothing changed")
    return nodes


def when(text: str) -> datetime:
    at = parse_datetime(text.replace("Z", "+00:00"))
    if at is None:
        raise CommandError(f"not a date and time: {text!r} (e.g. 2026-12-04T14:00Z)")
    return at if at.tzinfo is not None else at.replace(tzinfo=UTC)


def hours_after(at: datetime | None, hours: float | None) -> datetime | None:
    """The end `hours` after `at`; None without hours, which go with a start and are > 0."""
    if hours is None:
        return None
    if at is None or hours <= 0:
        raise CommandError("--hours goes with --at and is more than 0")
    return at + timedelta(hours=hours)
