"""The fleet: GPU nodes and their GPUs."""

from __future__ import annotations

from django.core.exceptions import ValidationError
from django.db import models


class NodeState(models.TextChoices):
    ACTIVE = "ACTIVE"
    CORDONED = "CORDONED"  # runs what it has, takes nothing new
    DRAINING = "DRAINING"  # finishing its work before maintenance
    DOWN = "DOWN"


class Node(models.Model):
    name = models.SlugField(max_length=63, unique=True)
    region = models.CharField(max_length=40, blank=True)
    island = models.CharField(max_length=40, blank=True, help_text="Rack / NVLink island.")
    address = models.CharField(
        max_length=255, blank=True,
        help_text="Host name or IP the other nodes of a gang reach it at (MASTER_ADDR when it "
                  "is a gang's first node); its name when blank.")
    gpu_type = models.CharField(max_length=40)
    gpu_count = models.PositiveSmallIntegerField()
    gpu_memory_mb = models.PositiveIntegerField(default=0)
    state = models.CharField(max_length=10, choices=NodeState.choices, default=NodeState.ACTIVE)
    state_reason = models.CharField(max_length=200, blank=True,
                                    help_text="Why the scheduler took it out of service.")
    last_heartbeat = models.DateTimeField(null=True, blank=True)
    maintenance_at = models.DateTimeField(
        null=True, blank=True,
        help_text="When it leaves service for maintenance: until then it starts only jobs "
                  "whose time limit ends by then; then it drains and what still runs there "
                  "moves. Clear it once the work is done.")
    maintenance_until = models.DateTimeField(
        null=True, blank=True,
        help_text="When its maintenance ends and it takes work again by itself; empty: when "
                  "an operator ends it.")
    labels = models.JSONField(default=dict, blank=True)
    # the organization it serves alone (workers/services/dedication.py): only its jobs start
    # here, and they fill it before they take shared GPUs; empty: shared by every one
    dedicated_to = models.ForeignKey(
        "jobs.Organization", null=True, blank=True, on_delete=models.SET_NULL,
        related_name="dedicated_nodes",
        help_text="Only this organization's jobs start here; empty: every organization's.")
    # a dedication ahead: shared till then (other jobs must end by then), its owner's from
    # then; null once it has begun. And when it ends by itself (null: when an operator ends it)
    dedicated_from = models.DateTimeField(null=True, blank=True)
    dedicated_until = models.DateTimeField(null=True, blank=True)
    registered_at = models.DateTimeField(auto_now_add=True)

    def __str__(self) -> str:
        return self.name

    def clean(self) -> None:
        if self.maintenance_until is not None and (
                self.maintenance_at is None or self.maintenance_until <= self.maintenance_at):
            raise ValidationError({"maintenance_until": "The maintenance must end after it "
                                                        "begins."})


class Gpu(models.Model):
    class Health(models.TextChoices):
        HEALTHY = "HEALTHY"
        UNHEALTHY = "UNHEALTHY"

    node = models.ForeignKey(Node, on_delete=models.CASCADE, related_name="gpus")
    index = models.PositiveSmallIntegerField()
    uuid = models.CharField(max_length=64, unique=True)
    health = models.CharField(max_length=10, choices=Health.choices, default=Health.HEALTHY)
    health_reason = models.CharField(max_length=200, blank=True,
                                     help_text="Why the node took this GPU out of service.")

    class Meta:
        ordering = ["node_id", "index"]
        constraints = [
            models.UniqueConstraint(fields=["node", "index"], name="gpu_index_per_node")
        ]

    def __str__(self) -> str:
        return f"{self.node.name}:{self.index}"

    @property
    def bound_attempt(self):
        binding = self.bindings.filter(released_at__isnull=True).first()
        return binding.attempt if binding else None
