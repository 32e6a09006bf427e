"""The dashboard's credits page: each of the user's organizations' buckets, this month's
budgets and usage by project, and latest transfers; and a month's statement as CSV, every
transfer of it, for whoever reconciles the books."""

from __future__ import annotations

import csv
import re
from collections.abc import Iterator
from datetime import date

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse, HttpResponseBadRequest, StreamingHttpResponse
from django.shortcuts import render
from django.utils import timezone

from credits.services.budgets import budget_report
from credits.services.statements import (
    STATEMENT_COLUMNS,
    organization_balance,
    recent_transfers,
    statement_rows,
)
from credits.services.usage import FIRST_YEAR, LAST_YEAR, monthly_usage
from jobs.models import Organization
from jobs.web.access import organization_of_member

MONTH = re.compile(r"(\d{4})-(0[1-9]|1[0-2])")


@login_required
def credits_page(request: HttpRequest) -> HttpResponse:
    orgs = Organization.objects.filter(memberships__user=request.user).order_by("slug")
    month = timezone.now().date()
    return render(request, "dashboard/credits.html", {"organizations": [
        {"org": org, "balance": organization_balance(org), "budgets": budget_report(org.pk),
         "usage": monthly_usage(org, month), "transfers": recent_transfers(org)}
        for org in orgs]})


class _Line:
    """What csv.writer writes to: each row handed back, to stream."""

    def write(self, text: str) -> str:
        return text


def _cell(value: object) -> object:
    """A text cell a spreadsheet would read as a formula, kept as text."""
    if isinstance(value, str) and value[:1] in ("=", "+", "-", "@"):
        return "'" + value
    return value


@login_required
def statement_csv(request: HttpRequest, slug: str) -> HttpResponse:
    """GET `?month=YYYY-MM` (this month by default): the month's transfers, oldest first."""
    org = organization_of_member(request, slug)
    text = request.GET.get("month", "")
    found = MONTH.fullmatch(text) if text else None
    if text and (found is None or not FIRST_YEAR <= int(found[1]) <= LAST_YEAR):
        # refused before the first row: a streamed answer's status is sent with it
        return HttpResponseBadRequest(f"month is YYYY-MM, of the years {FIRST_YEAR} to "
                                      f"{LAST_YEAR}")
    month = date(int(found[1]), int(found[2]), 1) if found else timezone.now().date()
    writer = csv.writer(_Line())

    def lines() -> Iterator[str]:
        yield writer.writerow(STATEMENT_COLUMNS)
        for row in statement_rows(org, month):
            yield writer.writerow([_cell(value) for value in row])
    response = StreamingHttpResponse(lines(), content_type="text/csv")
    name = f"{org.slug}-credits-{month.year:04d}-{month.month:02d}.csv"
    response["Content-Disposition"] = f'attachment; filename="{name}"'
    return response
