"""Operators see every account, hold and transfer; they change prices and budgets, never the
ledger's rows (grants go through the organization list's action or `manage.py
grant_credits`, so that each is a transfer)."""

from django.contrib import admin

from credits.models import Account, Budget, GpuPrice, Hold, Transfer
from gpusched.admin_base import ReadOnly


class HoldInline(admin.TabularInline):
    """A job's credits on its admin page: what it held where, spent, got back."""

    model = Hold
    extra = 0
    can_delete = False
    fields = ["account", "amount", "posted", "voided", "refunded", "created_at", "closed_at"]
    readonly_fields = fields

    def has_add_permission(self, request, obj=None):
        return False


@admin.register(Account)
class AccountAdmin(ReadOnly):
    list_display = ["__str__", "kind", "organization", "bucket", "expires_at", "credits_posted",
                    "debits_posted", "debits_pending"]
    list_filter = ["kind", "bucket"]
    list_select_related = ["organization"]
    search_fields = ["organization__slug", "code"]


@admin.register(Hold)
class HoldAdmin(ReadOnly):
    list_display = ["pk", "job", "account", "amount", "posted", "voided", "refunded",
                    "closed_at"]
    list_select_related = ["account__organization", "job"]
    raw_id_fields = ["job"]


@admin.register(Transfer)
class TransferAdmin(ReadOnly):
    list_display = ["pk", "kind", "amount", "debit", "credit", "job", "memo", "created_at"]
    list_filter = ["kind"]
    list_select_related = ["debit__organization", "credit__organization", "job"]
    search_fields = ["memo", "idempotency_key"]


@admin.register(GpuPrice)
class GpuPriceAdmin(admin.ModelAdmin):
    list_display = ["gpu_type", "credits_per_gpu_hour"]


@admin.register(Budget)
class BudgetAdmin(admin.ModelAdmin):
    list_display = ["__str__", "organization", "project", "user", "monthly_limit"]
    list_select_related = ["organization", "project__organization", "user"]
    raw_id_fields = ["organization", "project", "user"]
