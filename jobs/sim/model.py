"""Jobs, nodes and tiers of a simulated fleet."""

from __future__ import annotations

from dataclasses import dataclass, field

from jobs.defaults import DEFAULT_TIERS, TIER_FIELDS
from jobs.policy.types import TierSpec

GPU_MEMORY_MB = {"H100": 81_920, "H200": 143_360, "A100": 81_920, "L40S": 46_080}


def default_tiers() -> dict[str, TierSpec]:
    """The service's default tiers (jobs/defaults.py), so the simulator measures what runs."""
    tiers = {}
    for name, *values in DEFAULT_TIERS:
        spec = dict(zip(TIER_FIELDS, values, strict=True))
        spec["start_slo_s"] = float(spec.pop("start_slo_seconds"))
        tiers[name] = TierSpec(name, **spec)
    return tiers


@dataclass(frozen=True, slots=True)
class Maintenance:
    """Nodes that leave service at `at` for `duration` seconds, announced `notice` seconds
    ahead, and what the operator does with the notice: "window", the service's maintenance
    window (docs/nodes.md: from the notice only jobs whose time limit ends by `at` start
    there, and at `at` what still runs there is evacuated: it waits again, spending no
    retry); "drain", no new job there from the notice; "none", nothing (they go down at `at`
    with what runs there, as in a failure)."""

    nodes: tuple[str, ...]
    at: float
    duration: float
    notice: float = 0.0
    mode: str = "window"

    def covers(self, name: str, t: float) -> bool:
        """Whether the node is announced or in its maintenance at `t`."""
        return name in self.nodes and self.at - self.notice <= t < self.at + self.duration

    def idle_span(self, a: float, b: float) -> float:
        """Seconds of [a, b) between the notice and the hour: when what the mode does with
        the notice idles GPUs, or does not."""
        return max(0.0, min(b, self.at) - max(a, self.at - self.notice))


@dataclass(frozen=True, slots=True)
class NodeSpec:
    name: str
    gpus: int
    gpu_type: str = "H100"
    island: str = ""
    gpu_memory_mb: int = 81_920


def build_fleet(nodes: int, gpus_per_node: int, gpu_types: dict[str, float] | None = None,
                island_nodes: int = 8) -> list[NodeSpec]:
    """`nodes` nodes; GPU types split by fraction in the given order; islands of `island_nodes`."""
    mix = list((gpu_types or {"H100": 1.0}).items())
    total = sum(f for _, f in mix) or 1.0
    counts, acc = [], 0
    for i, (_, f) in enumerate(mix):
        c = nodes - acc if i == len(mix) - 1 else round(nodes * f / total)
        counts.append(c)
        acc += c
    out: list[NodeSpec] = []
    for (gtype, _), c in zip(mix, counts, strict=True):
        for _ in range(c):
            i = len(out)
            out.append(NodeSpec(f"n{i:04d}", gpus_per_node, gtype, f"isl{i // island_nodes}",
                                GPU_MEMORY_MB.get(gtype, 81_920)))
    return out


@dataclass(slots=True)
class SimJob:
    job_id: int
    org: str
    tier: str
    gpus: int
    submit: float
    duration: float  # seconds of work on its GPUs, without interruptions
    time_limit: float
    expected_duration: float | None = None
    gpu_types: tuple[str, ...] = ()
    min_gpu_memory_mb: int = 0
    project: str = ""
    user: str = ""  # who submitted it inside the project ("" where the workload names nobody)
    # state, filled by the engine
    saved: float = 0.0  # checkpointed work
    first_start: float | None = None
    first_estimate: float | None = None  # start of the first reservation it held, unstarted
    # (when, fleet seconds of work ahead) of the first line that showed it, unstarted
    first_line: tuple[float, float] | None = None
    end: float | None = None
    queued_since: float | None = None
    queued_total: float = 0.0
    attempts: int = 0
    preemptions: int = 0
    failures: int = 0
    retries: int = 0  # after lost or crashed tries, of the engine's max_retries
    avoid: str = ""  # the node its last try crashed on
    dead: bool = False  # its retries spent: it never ends
    restore_due: str = ""  # cause of the last interruption while work was saved
    extra: dict = field(default_factory=dict)

    @property
    def gpu_seconds(self) -> float:
        return self.gpus * self.duration
