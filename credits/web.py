"""The dashboard's credits page: each of the user's organizations' buckets, this month's
budgets and usage by project, and latest transfers."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.utils import timezone

from credits.services.budgets import budget_report
from credits.services.statements import organization_balance, recent_transfers
from credits.services.usage import monthly_usage
from jobs.models import Organization


@login_required
def credits_page(request: HttpRequest) -> HttpResponse:
    orgs = Organization.objects.filter(memberships__user=request.user).order_by("slug")
    month = timezone.now().date()
    return render(request, "dashboard/credits.html", {"organizations": [
        {"org": org, "balance": organization_balance(org), "budgets": budget_report(org.pk),
         "usage": monthly_usage(org, month), "transfers": recent_transfers(org)}
        for org in orgs]})
