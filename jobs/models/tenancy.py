"""Tenants: tiers, organizations, projects, members and their API keys."""

from __future__ import annotations

import hashlib
import secrets

from django.conf import settings
from django.db import models
from django.db.models import Q


class Tier(models.Model):
    """A class of service. Operators change or add tiers as data."""

    name = models.SlugField(max_length=40, unique=True)
    priority = models.IntegerField(help_text="Higher runs first.")
    weight = models.FloatField(default=1.0, help_text="Fair-share weight.")
    guaranteed_share = models.FloatField(default=0.0, help_text="Floor, fraction of fleet GPUs.")
    max_share = models.FloatField(default=1.0, help_text="Burst ceiling, fraction of GPUs.")
    start_slo_seconds = models.PositiveIntegerField(default=3600)
    preemptible = models.BooleanField(default=True)
    max_preemptions = models.PositiveSmallIntegerField(default=3)
    max_running_gpus_per_org = models.PositiveIntegerField(null=True, blank=True)
    max_queued_jobs_per_org = models.PositiveIntegerField(
        null=True, blank=True,
        help_text="An organization's waiting jobs past which a new one is refused (429); "
                  "empty: no limit.")
    api_requests_per_min = models.PositiveIntegerField(
        null=True, blank=True,
        help_text="API requests an organization of this tier may make a minute, all its keys "
                  "together; past it, 429 rate_limited. Empty: no limit.")
    monthly_credits = models.PositiveBigIntegerField(
        null=True, blank=True,
        help_text="Promotional credits each organization of this tier gets at the start of "
                  "every calendar month (UTC), expiring at its end; empty: none.")
    shed_after_backlog_s = models.PositiveIntegerField(
        null=True, blank=True,
        help_text="Refuse new jobs of this tier (429) while the work waiting at or above it "
                  "would keep the whole fleet busy longer than this; empty: never.")

    class Meta:
        ordering = ["-priority"]
        constraints = [
            # the policy divides by weights and takes shares of the fleet: nonsense values
            # would make it rank by accident, so the database refuses them
            models.CheckConstraint(condition=models.Q(weight__gt=0), name="tier_weight_positive",
                                   violation_error_message="A tier's weight must be above 0."),
            models.CheckConstraint(
                condition=models.Q(guaranteed_share__gte=0, max_share__gt=0, max_share__lte=1,
                                   guaranteed_share__lte=models.F("max_share")),
                name="tier_shares_in_range",
                violation_error_message="Shares must satisfy 0 <= guaranteed share <= "
                                        "burst ceiling <= 1, with a ceiling above 0."),
        ]

    def __str__(self) -> str:
        return self.name


MAX_ERASE_AFTER_HOURS = 366 * 24  # a year: past it, a retention is no promise to anyone


class Organization(models.Model):
    name = models.CharField(max_length=120)
    slug = models.SlugField(max_length=60, unique=True)
    tier = models.ForeignKey(Tier, on_delete=models.PROTECT, related_name="organizations")
    weight = models.FloatField(default=1.0, help_text="Fair-share weight inside its tier.")
    running_gpu_cap = models.PositiveIntegerField(
        null=True, blank=True, help_text="Running-GPU cap; empty: the tier's."
    )
    low_credits_threshold = models.PositiveBigIntegerField(
        default=0, help_text="Tell the organization's webhooks (credits.low) when its "
                             "available credits fall below this; 0: never.")
    # its own retention of its jobs' content: erased this many hours after each ends
    # (jobs/services/retention.py); null: kept as the service keeps outputs and logs
    erase_after_hours = models.PositiveIntegerField(
        null=True, blank=True, help_text="Erase each ended job's prompt, params, output and "
                                         "logs this many hours after it ends; empty: never.")
    # set while below the threshold and told so: one notice per fall, not one per job
    low_credits_notified = models.BooleanField(default=False, editable=False)
    created_at = models.DateTimeField(auto_now_add=True)
    # set by an operator (admin's "Suspend"): no new job is accepted or started, the running
    # ones finish, everything stays readable (jobs/services/suspension.py)
    suspended_at = models.DateTimeField(null=True, blank=True, editable=False)
    suspended_reason = models.CharField(max_length=200, blank=True, editable=False)

    class Meta:
        constraints = [
            models.CheckConstraint(condition=models.Q(weight__gt=0), name="org_weight_positive",
                                   violation_error_message="An organization's weight must be "
                                                           "above 0."),
            # 0 would erase every ended job at the next sweep; a form checks it too
            models.CheckConstraint(
                condition=models.Q(erase_after_hours__isnull=True) | models.Q(
                    erase_after_hours__range=(1, MAX_ERASE_AFTER_HOURS)),
                name="org_retention_in_range",
                violation_error_message=f"A retention is 1 to {MAX_ERASE_AFTER_HOURS} hours, "
                                        "or none."),
        ]

    def __str__(self) -> str:
        return self.slug

    @staticmethod
    def gpu_cap(own: int | None, tier_cap: int | None, suspended_at) -> int | None:
        """The running-GPU cap a round holds an organization to: 0 while suspended, else its
        own, else its tier's (None: none); 0 is a cap (no new work), not "none"."""
        if suspended_at is not None:
            return 0
        return tier_cap if own is None else own


class Project(models.Model):
    organization = models.ForeignKey(Organization, on_delete=models.CASCADE,
                                     related_name="projects")
    name = models.SlugField(max_length=60)
    weight = models.FloatField(default=1.0)
    running_gpu_cap = models.PositiveIntegerField(
        null=True, blank=True,
        help_text="GPUs the project's jobs may hold at once, inside the organization's cap; "
                  "empty: no cap of its own, 0: no new work.")

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["organization", "name"], name="project_name_per_org"),
            models.CheckConstraint(condition=models.Q(weight__gt=0),
                                   name="project_weight_positive",
                                   violation_error_message="A project's weight must be above 0."),
        ]

    def __str__(self) -> str:
        return f"{self.organization.slug}/{self.name}"


class Membership(models.Model):
    class Role(models.TextChoices):
        OWNER = "owner"
        MEMBER = "member"

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE,
                             related_name="memberships")
    organization = models.ForeignKey(Organization, on_delete=models.CASCADE,
                                     related_name="memberships")
    role = models.CharField(max_length=10, choices=Role.choices, default=Role.MEMBER)
    # fair-share weight of the user's jobs inside each project of the organization
    weight = models.FloatField(default=1.0)
    running_gpu_cap = models.PositiveIntegerField(
        null=True, blank=True,
        help_text="GPUs the member's jobs may hold at once over all the organization's "
                  "projects, inside its caps; empty: no cap of their own, 0: no new work.")

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["user", "organization"], name="one_membership"),
            models.CheckConstraint(condition=models.Q(weight__gt=0),
                                   name="membership_weight_positive",
                                   violation_error_message="A member's weight must be above 0."),
        ]

    def __str__(self) -> str:
        return f"{self.user} in {self.organization} ({self.role})"


KEY_PREFIX = "gs_"


def hash_key(raw: str) -> str:
    # Keys are 256-bit random tokens, so a plain SHA-256 cannot be brute-forced.
    return hashlib.sha256(raw.encode()).hexdigest()


class ApiKey(models.Model):
    """Stored hashed; the raw key is shown once, by `ApiKey.issue`."""

    class Scope(models.TextChoices):
        """What a key may do, each scope all that the one before may (jobs/api/scopes.py):
        a dashboard or a billing script reads, a render service runs jobs, and only a key
        that may do everything changes the organization's webhooks."""

        READ = "read", "read: every GET"
        JOBS = "jobs", "jobs: read, and submit, change and cancel jobs"
        FULL = "full", "full: jobs, and the organization's webhooks"

    organization = models.ForeignKey(Organization, on_delete=models.CASCADE,
                                     related_name="api_keys")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True,
                             on_delete=models.SET_NULL)
    name = models.CharField(max_length=80)
    prefix = models.CharField(max_length=12, db_index=True, editable=False)
    key_hash = models.CharField(max_length=64, unique=True, editable=False)
    created_at = models.DateTimeField(auto_now_add=True)
    last_used_at = models.DateTimeField(null=True, blank=True)
    # refused from then on (null: never); an owner sets it when making the key
    expires_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)
    revoked_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True,
                                   on_delete=models.SET_NULL, related_name="+")
    scope = models.CharField(max_length=4, choices=Scope.choices, default=Scope.FULL)

    def __str__(self) -> str:
        return f"{self.prefix}… ({self.name})"

    @staticmethod
    def live_at(now) -> Q:
        """The keys a request may use at `now`: neither revoked nor expired."""
        return Q(revoked_at__isnull=True) & (Q(expires_at__isnull=True) | Q(expires_at__gt=now))

    @classmethod
    def issue(cls, *, organization: Organization, name: str, user=None,
              expires_at=None, scope: str = Scope.FULL) -> tuple[ApiKey, str]:
        raw = KEY_PREFIX + secrets.token_urlsafe(32)
        key = cls.objects.create(organization=organization, name=name, user=user,
                                 prefix=raw[:11], key_hash=hash_key(raw),
                                 expires_at=expires_at, scope=scope)
        return key, raw
