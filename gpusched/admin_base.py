"""Admin bases for rows that services own: operators look, or change only what is theirs.

A change form saves the whole row it read. For rows that other processes write meanwhile
(a node's heartbeat, a key's last use, an organization's credit notice) that would put back
what they wrote, so changes save only the fields the form changed.
"""

from __future__ import annotations

from django.contrib import admin


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
