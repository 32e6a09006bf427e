"""The default tiers, created by migration and by `tiers_ensure_defaults` (pure data)."""

# name, priority, fair-share weight, guaranteed share, max share, start SLO (s),
# preemptible, max preemptions per job
DEFAULT_TIERS = [
    ("enterprise", 300, 4.0, 0.20, 1.0, 30, False, 0),
    ("paid", 200, 2.0, 0.40, 1.0, 300, True, 3),
    ("free", 100, 1.0, 0.10, 1.0, 3600, True, 5),
]
TIER_FIELDS = ("priority", "weight", "guaranteed_share", "max_share", "start_slo_seconds",
               "preemptible", "max_preemptions")
