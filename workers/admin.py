from django.contrib import admin, messages
from django.db.models import Count, Q

from gpusched.admin_base import ChangedFieldsOnly
from workers.models import Gpu, Node
from workers.services.fleet import (
    gpu_return_to_service,
    gpu_take_out,
    node_cordon,
    node_drain,
    node_return_to_service,
)


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
    (region, island, labels) and move it by the actions (cordon, drain, return)."""

    list_display = ["name", "state", "state_reason", "gpu_type", "gpu_count", "live_attempts",
                    "gpu_memory_mb", "region", "island", "last_heartbeat"]
    list_filter = ["state", "gpu_type", "region", "island"]
    search_fields = ["name"]
    inlines = [GpuInline]
    readonly_fields = ["name", "gpu_type", "gpu_count", "gpu_memory_mb", "state",
                       "state_reason", "last_heartbeat", "registered_at"]

    def has_add_permission(self, request) -> bool:
        return False  # a node's agent registers it
    actions = ["cordon", "drain", "drain_and_evacuate", "return_to_service"]

    def get_queryset(self, request):
        # its own attempts and the ranks it runs of gangs that span nodes
        return super().get_queryset(request).annotate(
            live=Count("attempts", filter=Q(attempts__ended_at__isnull=True), distinct=True)
            + Count("attempt_ranks", filter=Q(attempt_ranks__ended_at__isnull=True),
                    distinct=True))

    @admin.display(description="live attempts", ordering="live")
    def live_attempts(self, node: Node) -> int:
        return node.live

    @admin.action(description="Cordon: take no new jobs")
    def cordon(self, request, queryset):
        for node in queryset:
            node_cordon(node)
        messages.info(request, f"{queryset.count()} node(s) cordoned.")

    @admin.action(description="Drain: take no new jobs, let running ones finish")
    def drain(self, request, queryset):
        for node in queryset:
            node_drain(node)
        messages.info(request, f"{queryset.count()} node(s) draining.")

    @admin.action(description="Drain and evacuate: running jobs checkpoint and move elsewhere")
    def drain_and_evacuate(self, request, queryset):
        asked = sum(node_drain(node, evacuate=True) for node in queryset)
        messages.info(request, f"{queryset.count()} node(s) draining; {asked} running job(s) "
                               "asked to checkpoint and stop.")

    @admin.action(description="Return to service")
    def return_to_service(self, request, queryset):
        for node in queryset:
            node_return_to_service(node)
        messages.info(request, f"{queryset.count()} node(s) take jobs again (unless down).")


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

    @admin.action(description="Take out of service: no new jobs on these GPUs")
    def take_out(self, request, queryset):
        for gpu in queryset:
            gpu_take_out(gpu, by=request.user.get_username())
        messages.info(request, f"{queryset.count()} GPU(s) out of service until returned.")

    @admin.action(description="Return to service (the node's readings judge them again)")
    def return_to_service(self, request, queryset):
        for gpu in queryset:
            gpu_return_to_service(gpu)
        messages.info(request, f"{queryset.count()} GPU(s) returned.")
