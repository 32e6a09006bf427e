"""A job's labels: the client's own names for it ({key: value}), set when it is submitted and
carried wherever the job is shown (the API, webhooks, the dashboard), so that a client finds
its jobs by its own request id or pipeline step without keeping a table of ours."""

from __future__ import annotations

import re

from django.db.models import QuerySet, TextField
from django.db.models.fields.json import KeyTextTransform
from django.db.models.functions import Cast

from jobs.services.errors import ValidationFailed
from jobs.services.storable import unstorable

MAX_LABELS = 16
MAX_VALUE = 256
KEY = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,62}")


def check_labels(labels: object) -> None:
    """Refuse labels that are not at most MAX_LABELS pairs of a KEY and a string value."""
    if not isinstance(labels, dict):
        raise ValidationFailed("labels must be an object of strings", code="invalid_labels",
                               field="labels")
    if len(labels) > MAX_LABELS:
        raise ValidationFailed(f"at most {MAX_LABELS} labels", code="invalid_labels",
                               field="labels")
    for key, value in labels.items():
        if not isinstance(key, str) or not KEY.fullmatch(key):
            raise ValidationFailed(
                f"label {key!r}: a key is 1 to 63 letters, digits, '_', '.' or '-', "
                "starting with a letter or digit", code="invalid_labels", field="labels")
        if not isinstance(value, str) or len(value) > MAX_VALUE or unstorable(value):
            raise ValidationFailed(f"label {key!r}: a value is a string of at most "
                                   f"{MAX_VALUE} storable characters", code="invalid_labels",
                                   field="labels")


def with_labels(jobs: QuerySet, wanted: list[str]) -> QuerySet:
    """The jobs having each of `wanted`: `key:value` (that value) or `key` (any value)."""
    for n, item in enumerate(wanted):
        key, colon, value = item.partition(":")
        if not KEY.fullmatch(key):
            raise ValidationFailed(f"label {item!r}: not key or key:value",
                                   code="invalid_labels", field="label")
        if where := unstorable(value):  # no label holds one: the database refuses it
            raise ValidationFailed(f"label {key!r}: the value holds {where}, a character "
                                   "no label can store", code="invalid_labels", field="label")
        if not colon:
            jobs = jobs.filter(labels__has_key=key)
            continue
        # the key as data, never as a path of lookups (a key may hold "__"); the value
        # compared as text: SQLite reads a key transform's right side as JSON, so "b7" would
        # be malformed there and "1" the number 1
        alias = f"label_{n}"
        jobs = jobs.alias(**{alias: Cast(KeyTextTransform(key, "labels"), TextField())}
                          ).filter(**{alias: value})
    return jobs
