"""The organization's credits, as its API keys see them."""

from __future__ import annotations

from datetime import date

from django.utils import timezone
from rest_framework import serializers
from rest_framework.response import Response
from rest_framework.views import APIView

from credits.models import Account, Transfer
from credits.services.budgets import budget_report
from credits.services.statements import organization_balance, recent_transfers, transfers_of
from credits.services.usage import FIRST_YEAR, LAST_YEAR, monthly_usage
from jobs.api.paging import PageQuery, page_of
from jobs.api.queries import label_filter


class TransferSerializer(serializers.ModelSerializer):
    bucket = serializers.SerializerMethodField()
    direction = serializers.SerializerMethodField()

    class Meta:
        model = Transfer
        fields = ["id", "kind", "amount", "direction", "bucket", "job", "attempt", "memo",
                  "created_at"]

    def get_direction(self, transfer: Transfer) -> str:
        return "in" if transfer.credit.kind == Account.Kind.WALLET else "out"

    def get_bucket(self, transfer: Transfer) -> str:
        wallet = transfer.credit if self.get_direction(transfer) == "in" else transfer.debit
        return wallet.bucket


class CreditBalance(APIView):
    """GET: spendable and held credits, bucket by bucket, this month's budgets and the latest
    transfers."""

    def get(self, request):
        org = request.user.organization
        recent = recent_transfers(org)
        return Response({**organization_balance(org), "budgets": budget_report(org.pk),
                         "transfers": TransferSerializer(recent, many=True).data})


class TransferListQuery(PageQuery):
    kind = serializers.ChoiceField(choices=Transfer.Kind.values, required=False)
    job = serializers.IntegerField(min_value=1, required=False)


class TransferList(APIView):
    """GET: every transfer of the organization, newest first, a page at a time (`?kind=`,
    `?job=`, `?limit=`, `?before=<id>` from `next`): the statement a client reconciles."""

    def get(self, request):
        query = TransferListQuery(data=request.query_params)
        query.is_valid(raise_exception=True)
        q = query.validated_data
        transfers = transfers_of(request.user.organization)
        for name, lookup in (("kind", "kind"), ("job", "job_id")):
            if name in q:
                transfers = transfers.filter(**{lookup: q[name]})
        page, following = page_of(transfers, q, request, "/api/v1/credits/transfers")
        return Response({"results": TransferSerializer(page, many=True).data,
                         "next": following})


class UsageQuery(serializers.Serializer):
    month = serializers.RegexField(r"^\d{4}-(0[1-9]|1[0-2])$", required=False,
                                   help_text="YYYY-MM, UTC; this month by default")
    label = label_filter(required=False)

    def validate_month(self, value: str) -> date:
        year, month = map(int, value.split("-"))
        if not FIRST_YEAR <= year <= LAST_YEAR:
            raise serializers.ValidationError(
                f"a month of the years {FIRST_YEAR} to {LAST_YEAR}, none earlier holds usage")
        return date(year, month, 1)


class Usage(APIView):
    """GET: one month's credits spent and refunded and GPU-hours run, in all, by project and
    by GPU type (`?month=YYYY-MM`, UTC; this month by default)."""

    def get(self, request):
        query = UsageQuery(data=request.query_params)
        query.is_valid(raise_exception=True)
        month = query.validated_data.get("month") or timezone.now().date()
        return Response(monthly_usage(request.user.organization, month,
                                      labels=query.validated_data.get("label", [])))
