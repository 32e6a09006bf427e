"""The organization list's "Suspend" and "Resume" actions (jobs/services/suspension.py)."""

from __future__ import annotations

from django import forms
from django.contrib import admin, messages
from django.template.response import TemplateResponse

from jobs.services.errors import ServiceError
from jobs.services.suspension import organization_resume, organization_suspend


class SuspendForm(forms.Form):
    reason = forms.CharField(max_length=200, help_text="Shown to the organization's clients "
                                                       "in each refusal, and kept in its audit "
                                                       "trail.")


@admin.action(description="Suspend: accept and start no new jobs")
def suspend(modeladmin, request, queryset):
    form = SuspendForm(request.POST if "apply" in request.POST else None)
    if not form.is_valid():
        return TemplateResponse(request, "admin/jobs/suspend.html", {
            **modeladmin.admin_site.each_context(request), "title": "Suspend",
            "form": form, "organizations": queryset,
            "action_checkbox_name": admin.helpers.ACTION_CHECKBOX_NAME})
    for org in queryset:
        try:
            done = organization_suspend(organization=org, reason=form.cleaned_data["reason"],
                                        by=request.user)
        except ServiceError as exc:
            messages.error(request, f"{org.slug}: {exc.message}")
            continue
        messages.info(request, f"{org.slug} is suspended." if done
                      else f"{org.slug} was suspended already.")
    return None


@admin.action(description="Resume suspended organizations")
def resume(modeladmin, request, queryset):
    for org in queryset:
        done = organization_resume(organization=org, by=request.user)
        messages.info(request, f"{org.slug} is resumed." if done
                      else f"{org.slug} was not suspended.")
