from django.contrib import admin

from workers.models import Gpu, Node


class GpuInline(admin.TabularInline):
    model = Gpu
    extra = 0
    fields = ["index", "uuid", "health"]


@admin.register(Node)
class NodeAdmin(admin.ModelAdmin):
    list_display = ["name", "state", "gpu_type", "gpu_count", "gpu_memory_mb", "region",
                    "island", "last_heartbeat"]
    list_filter = ["state", "gpu_type", "region", "island"]
    search_fields = ["name"]
    inlines = [GpuInline]


@admin.register(Gpu)
class GpuAdmin(admin.ModelAdmin):
    list_display = ["__str__", "uuid", "health", "bound_attempt"]
    list_filter = ["health", "node__gpu_type"]
    search_fields = ["uuid", "node__name"]
