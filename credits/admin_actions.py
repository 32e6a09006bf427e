"""The organization list's "Grant credits" action: a form, then one grant per organization."""

from __future__ import annotations

from datetime import timedelta

from django import forms
from django.contrib import messages
from django.template.response import TemplateResponse
from django.utils import timezone

from credits.services.grants import credits_grant, grant_key
from gpusched.admin_base import action_form, operator_action
from jobs.services.errors import ServiceError


class GrantForm(forms.Form):
    amount = forms.IntegerField(min_value=1, help_text="Credits for each organization.")
    promo = forms.BooleanField(required=False, label="Promotional (spent first)")
    expires_in_days = forms.FloatField(required=False, min_value=0.01, max_value=36_500,
                                       help_text="Promotional credits only (a century at "
                                                 "most).")
    key = forms.CharField(required=False, max_length=200,
                          help_text="An invoice or order id: a grant repeated with it acts once.")
    memo = forms.CharField(required=False, max_length=200)

    def clean(self):
        data = super().clean()
        if data.get("expires_in_days") and not data.get("promo"):
            raise forms.ValidationError("only promotional credits expire")
        return data


@operator_action("Grant credits")
def grant_credits(modeladmin, request, queryset):
    form = action_form(modeladmin, request, queryset, GrantForm, action="grant_credits",
                       intro="Grant credits to", button="Grant",
                       explained="Each grant is a transfer from system:issuance.")
    if isinstance(form, TemplateResponse):
        return form
    data = form.cleaned_data
    days = data["expires_in_days"]
    for org in queryset:
        key = grant_key(org, data["key"])
        try:
            credits_grant(organization=org, amount=data["amount"], promo=data["promo"],
                          expires_at=timezone.now() + timedelta(days=days) if days else None,
                          idempotency_key=key, memo=data["memo"] or f"granted by {request.user}",
                          by=request.user)
        except ServiceError as exc:
            messages.error(request, f"{org.slug}: {exc.message}")
        else:
            messages.info(request, f"{org.slug}: {data['amount']} credits granted.")
    return None
