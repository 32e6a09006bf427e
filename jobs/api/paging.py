"""Cursor pages for lists newest first: `?limit=` rows, `?before=<id>` the cursor that the
answer's `next` URL carries (stable while rows are added, unlike offsets)."""

from __future__ import annotations

from urllib.parse import urlencode

from django.db.models import QuerySet
from rest_framework import serializers


class PageQuery(serializers.Serializer):
    limit = serializers.IntegerField(min_value=1, max_value=500, default=100)
    before = serializers.IntegerField(min_value=1, required=False)


def page_of(rows: QuerySet, query: dict, request, path: str) -> tuple[list, str | None]:
    """One page of `rows` (ordered by -pk) and the URL of the next, None on the last."""
    if "before" in query:
        rows = rows.filter(pk__lt=query["before"])
    page = list(rows[:query["limit"] + 1])
    if len(page) <= query["limit"]:
        return page, None
    page = page[:query["limit"]]
    # every value of a repeated filter (label=a&label=b) carries over, not only its last
    params = {**{k: v for k, v in request.query_params.lists() if k != "before"},
              "before": [page[-1].pk]}
    return page, f"{path}?{urlencode(params, doseq=True)}"
