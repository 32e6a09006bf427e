"""The default tiers, created by migration and by `tiers_ensure_defaults` (pure data).

Floors are what a tier keeps even against higher tiers, so the floors of the tiers below
enterprise bound what enterprise can ever run: with paid at 20% and free at 10%, enterprise
reaches 70% of the fleet. When it alone offers 60% (3x overload, in campaigns) that is not
enough for its 30 s start SLO: an ideal, gang-free pool gives it a p95 of 128 s, 60 s with
floors of 10% and 5%, 24 s with none; the floors are kept as the lower tiers' guarantee.
A 40% paid floor capped enterprise at 50% and, at 1.5x, ranked paid (below its floor) ahead
of enterprise; docs/simulator.md has the figures.
"""

# name, priority, fair-share weight, guaranteed share, max share, start SLO (s),
# preemptible, max preemptions per job
DEFAULT_TIERS = [
    ("enterprise", 300, 4.0, 0.20, 1.0, 30, False, 0),
    ("paid", 200, 2.0, 0.20, 1.0, 300, True, 3),
    ("free", 100, 1.0, 0.10, 1.0, 3600, True, 5),
]
TIER_FIELDS = ("priority", "weight", "guaranteed_share", "max_share", "start_slo_seconds",
               "preemptible", "max_preemptions")
# Admission sheds a tier's new jobs while the work waiting at or above it would keep the
# fleet busy this long (jobs/services/admission.py): the lowest tier first, enterprise never.
# Kept apart from DEFAULT_TIERS, which migration 0002 reads as it was.
DEFAULT_SHED_AFTER_BACKLOG_S = {"paid": 24 * 3600, "free": 6 * 3600}
# API requests a minute per organization, all its keys together (jobs/api/throttles.py):
# polling a job's state every second is 60; a tenant's client loop gone wrong is not
DEFAULT_API_REQUESTS_PER_MIN = {"enterprise": 6000, "paid": 3000, "free": 600}
