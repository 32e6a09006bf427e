"""Fencing tokens: strictly increasing numbers from a database sequence."""

from __future__ import annotations

from django.db import connection
from django.db.models import F

SEQUENCE = "gpusched_fencing_token"


def next_token() -> int:
    """A token no attempt ever had; later attempts always get larger ones."""
    if connection.vendor == "postgresql":
        with connection.cursor() as cur:
            cur.execute("SELECT nextval(%s)", [SEQUENCE])
            return cur.fetchone()[0]
    # SQLite has no sequences; one counter row, bumped inside the writer's lock.
    from jobs.models.sequence import Counter

    Counter.objects.get_or_create(name=SEQUENCE)
    Counter.objects.filter(name=SEQUENCE).update(value=F("value") + 1)
    return Counter.objects.get(name=SEQUENCE).value
