"""Admin bases for rows that services own: operators look, or change only what is theirs.

A change form saves the whole row it read. For rows that other processes write meanwhile
(a node's heartbeat, a key's last use, an organization's credit notice) that would put back
what they wrote, so changes save only the fields the form changed.
"""

from __future__ import annotations

from django import forms
from django.contrib import admin
from django.template.response import TemplateResponse


class ReadOnly(admin.ModelAdmin):
    """Rows written only by services (the ledger, attempts, bindings, the audit trail)."""

    def has_add_permission(self, request, obj=None) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False

    def has_delete_permission(self, request, obj=None) -> bool:
        return False


class ChangedFieldsOnly(admin.ModelAdmin):
    """A change writes the fields its form changed, and no column another process owns."""

    def save_model(self, request, obj, form, change) -> None:
        if not change:
            obj.save()
            return
        concrete = {f.name for f in obj._meta.concrete_fields}
        fields = [name for name in form.changed_data if name in concrete]
        if fields:
            obj.save(update_fields=fields)


def action_form(modeladmin, request, queryset, form_class: type[forms.Form], *, action: str,
                intro: str, explained: str, button: str,
                noun: str = "organization") -> forms.Form | TemplateResponse:
    """A list action that asks first: its form filled in and valid once the operator
    applied it, else the page that asks (again, with what was wrong)."""
    form = form_class(request.POST if "apply" in request.POST else None)
    if form.is_valid():
        return form
    return TemplateResponse(request, "admin/action_form.html", {
        **modeladmin.admin_site.each_context(request), "title": button, "form": form,
        "objects": queryset, "noun": noun, "action": action, "intro": intro,
        "explained": explained,
        "button": button, "action_checkbox_name": admin.helpers.ACTION_CHECKBOX_NAME})


def operator_action(description: str):
    """An admin action that changes what it acts on: offered only to those who may change
    the model's rows. Django offers an action without permissions to whoever may view the
    list, so a view-only operator could grant credits or drain a node."""
    return admin.action(description=description, permissions=["change"])
