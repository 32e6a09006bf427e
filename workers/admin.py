from datetime import timedelta

from django import forms
from django.contrib import admin, messages
from django.db.models import Count, Q
from django.template.response import TemplateResponse
from django.utils import timezone

from gpusched.admin_base import ChangedFieldsOnly, action_form, operator_action
from jobs.models import Organization
from jobs.services.errors import ServiceError
from workers.models import Gpu, Node
from workers.services.dedication import nodes_dedicate
from workers.services.fleet import (
    gpu_return_to_service,
    gpu_take_out,
    node_cordon,
    node_drain,
    node_return_to_service,
    node_schedule_maintenance,
)


class MaintenanceForm(forms.Form):
    at = forms.DateTimeField(help_text="When the work begins (UTC), e.g. 2026-12-04 14:00.")
    hours = forms.FloatField(required=False, min_value=0.01, max_value=24 * 365,
                             help_text="How long it lasts: then the node takes work again by "
                                       "itself. Empty: until you end it.")


class DedicateForm(forms.Form):
    organization = forms.ModelChoiceField(Organization.objects.order_by("slug"),
                                          to_field_name="slug")
    at = forms.DateTimeField(required=False, help_text="When it begins (UTC), e.g. 2026-12-08 "
                                                       "09:00; till then others' jobs must "
                                                       "end by then. Empty: now.")
    hours = forms.FloatField(required=False, min_value=0.01, max_value=24 * 366,
                             help_text="How long it lasts: then the nodes are shared again by "
                                       "themselves. Empty: until you share them.")
    evacuate = forms.BooleanField(required=False, help_text="Beginning now: ask other "
                                                            "organizations' jobs running "
                                                            "there to checkpoint and move; "
                                                            "else they finish there. One "
                                                            "ahead moves them when it "
                                                            "begins.")


class GpuInline(admin.TabularInline):
    """A node's GPUs as its agent registered them; health moves by the GPU list's actions."""

    model = Gpu
    extra = 0
    can_delete = False
    fields = ["index", "uuid", "health", "health_reason"]
    readonly_fields = fields

    def has_add_permission(self, request, obj=None) -> bool:
        return False


@admin.register(Node)
class NodeAdmin(ChangedFieldsOnly):
    """Its agent registers a node and its heartbeats keep it; operators set where it stands
    (region, island, labels, a maintenance window ahead) and move it by the actions (cordon,
    drain, return, end of maintenance)."""

    list_display = ["name", "state", "state_reason", "maintenance_at", "maintenance_until",
                    "gpu_type", "gpu_count", "dedicated_to", "dedicated_from",
                    "dedicated_until",
                    "live_attempts", "gpu_memory_mb", "region", "island", "last_heartbeat"]
    list_filter = ["state", "gpu_type", "region", "island", "dedicated_to"]
    search_fields = ["name"]
    inlines = [GpuInline]
    # a dedication moves by its actions: audited, and the next round is asked for at once
    readonly_fields = ["name", "gpu_type", "gpu_count", "gpu_memory_mb", "state",
                       "state_reason", "last_heartbeat", "registered_at", "dedicated_to",
                       "dedicated_from", "dedicated_until"]

    actions = ["cordon", "drain", "drain_and_evacuate", "return_to_service",
               "schedule_maintenance", "end_maintenance", "dedicate", "share"]

    def has_add_permission(self, request) -> bool:
        return False  # a node's agent registers it

    def save_model(self, request, obj, form, change) -> None:
        super().save_model(request, obj, form, change)
        if {"maintenance_at", "maintenance_until"} & set(form.changed_data):
            # as the actions do: a window moved later or cleared returns a node drained for it
            node_schedule_maintenance(obj, obj.maintenance_at, obj.maintenance_until)

    def get_queryset(self, request):
        # its own attempts and the ranks it runs of gangs that span nodes
        return super().get_queryset(request).annotate(
            live=Count("attempts", filter=Q(attempts__ended_at__isnull=True), distinct=True)
            + Count("attempt_ranks", filter=Q(attempt_ranks__ended_at__isnull=True),
                    distinct=True))

    @admin.display(description="live attempts", ordering="live")
    def live_attempts(self, node: Node) -> int:
        return node.live

    @operator_action("Cordon: take no new jobs")
    def cordon(self, request, queryset):
        for node in queryset:
            node_cordon(node)
        messages.info(request, f"{queryset.count()} node(s) cordoned.")

    @operator_action("Drain: take no new jobs, let running ones finish")
    def drain(self, request, queryset):
        for node in queryset:
            node_drain(node)
        messages.info(request, f"{queryset.count()} node(s) draining.")

    @operator_action("Drain and evacuate: running jobs checkpoint and move elsewhere")
    def drain_and_evacuate(self, request, queryset):
        asked = sum(node_drain(node, evacuate=True) for node in queryset)
        messages.info(request, f"{queryset.count()} node(s) draining; {asked} running job(s) "
                               "asked to checkpoint and stop.")

    @operator_action("Return to service")
    def return_to_service(self, request, queryset):
        for node in queryset:
            node_return_to_service(node)
        messages.info(request, f"{queryset.count()} node(s) take jobs again (unless down).")

    @operator_action("Schedule maintenance: start only jobs that end before it")
    def schedule_maintenance(self, request, queryset):
        form = action_form(self, request, queryset, MaintenanceForm,
                           action="schedule_maintenance", noun="node",
                           intro="Schedule maintenance", button="Schedule",
                           explained="Until then each node starts only jobs whose time limit "
                                     "ends by then, while it stays in service; then it drains "
                                     "and what still runs there checkpoints and resumes "
                                     "elsewhere. It takes work again after the hours given, "
                                     "or when you end maintenance.")
        if isinstance(form, TemplateResponse):
            return form
        at, hours = form.cleaned_data["at"], form.cleaned_data["hours"]
        until = at + timedelta(hours=hours) if hours else None
        for node in queryset:
            node_schedule_maintenance(node, at, until)
        back = f", back at {until:%Y-%m-%d %H:%M} UTC" if until else ""
        messages.info(request, f"{queryset.count()} node(s) leave service at {at:%Y-%m-%d %H:%M} "
                               f"UTC{back}.")
        return None

    @operator_action("Dedicate to an organization: only its jobs start there")
    def dedicate(self, request, queryset):
        form = action_form(self, request, queryset, DedicateForm, action="dedicate",
                           noun="node", intro="Dedicate", button="Dedicate",
                           explained="From the next scheduling round only the organization's "
                                     "jobs start on these nodes, and they fill them before "
                                     "shared ones; the nodes idle while it has no work. Its "
                                     "caps and fair share count them as any GPUs.")
        if isinstance(form, TemplateResponse):
            return form
        org, at, hours = (form.cleaned_data[k] for k in ("organization", "at", "hours"))
        start = at or timezone.now()
        until = start + timedelta(hours=hours) if hours else None
        try:
            asked = nodes_dedicate(queryset, org, by=request.user, at=at, until=until,
                                   evacuate=form.cleaned_data["evacuate"])
        except ServiceError as exc:
            messages.error(request, exc.message)
            return None
        moved = f"; {asked} running job(s) of others asked to move" if asked else ""
        when = f" from {start:%Y-%m-%d %H:%M} UTC" if at else ""
        end = f" until {until:%Y-%m-%d %H:%M} UTC" if until else ""
        messages.info(request, f"{queryset.count()} node(s) dedicated to {org.slug}{when}{end}"
                               f"{moved}.")
        return None

    @operator_action("Share with every organization again")
    def share(self, request, queryset):
        nodes_dedicate(queryset, None, by=request.user)
        messages.info(request, f"{queryset.count()} node(s) shared by every organization.")

    @operator_action("End maintenance: clear the window, return the node to service")
    def end_maintenance(self, request, queryset):
        for node in queryset:
            node_schedule_maintenance(node, None)
        messages.info(request, f"{queryset.count()} node(s) have no maintenance window.")


@admin.register(Gpu)
class GpuAdmin(admin.ModelAdmin):
    """GPUs as their node's agent registered them; health moves by the actions."""

    list_display = ["__str__", "uuid", "health", "health_reason", "bound_attempt"]
    list_filter = ["health", "node__gpu_type"]
    search_fields = ["uuid", "node__name"]
    actions = ["take_out", "return_to_service"]
    readonly_fields = ["node", "index", "uuid", "health", "health_reason"]

    def has_add_permission(self, request) -> bool:
        return False

    @operator_action("Take out of service: no new jobs on these GPUs")
    def take_out(self, request, queryset):
        for gpu in queryset:
            gpu_take_out(gpu, by=request.user.get_username())
        messages.info(request, f"{queryset.count()} GPU(s) out of service until returned.")

    @operator_action("Return to service (the node's readings judge them again)")
    def return_to_service(self, request, queryset):
        for gpu in queryset:
            gpu_return_to_service(gpu)
        messages.info(request, f"{queryset.count()} GPU(s) returned.")
