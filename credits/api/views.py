"""The organization's credits, as its API keys see them."""

from __future__ import annotations

from rest_framework import serializers
from rest_framework.response import Response
from rest_framework.views import APIView

from credits.models import Account, Transfer
from credits.services.budgets import budget_report
from credits.services.statements import organization_balance, recent_transfers

RECENT_TRANSFERS = 50


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
        recent = recent_transfers(org, RECENT_TRANSFERS)
        return Response({**organization_balance(org), "budgets": budget_report(org.pk),
                         "transfers": TransferSerializer(recent, many=True).data})
