"""The organization list's "Suspend" and "Resume" actions (jobs/services/suspension.py)."""

from __future__ import annotations

from django import forms
from django.contrib import admin, messages
from django.template.response import TemplateResponse

from gpusched.admin_base import action_form
from jobs.services.errors import ServiceError
from jobs.services.suspension import organization_resume, organization_suspend


class SuspendForm(forms.Form):
    reason = forms.CharField(max_length=200, help_text="Shown to the organization's clients "
                                                       "in each refusal, and kept in its audit "
                                                       "trail.")


@admin.action(description="Suspend: accept and start no new jobs")
def suspend(modeladmin, request, queryset):
    form = action_form(modeladmin, request, queryset, SuspendForm, action="suspend",
                       intro="Suspend", button="Suspend",
                       explained="No new job is accepted or started until it is resumed; "
                                 "running jobs finish; jobs, outputs, logs and credits stay "
                                 "readable.")
    if isinstance(form, TemplateResponse):
        return form
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
