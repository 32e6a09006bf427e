from .attempt import Attempt, AttemptRank, AttemptStatus, GpuBinding
from .audit import OrganizationEvent
from .checkpoint import StoredCheckpoint
from .invitation import Invitation
from .job import Job, JobEvent
from .runtime import RunTimeStat
from .sequence import Counter
from .tenancy import ApiKey, Membership, Organization, Project, Tier
from .usage import UsageAccount
from .webhook import WebhookDelivery, WebhookEndpoint

__all__ = [
    "ApiKey", "Attempt", "AttemptRank", "AttemptStatus", "Counter", "GpuBinding", "Invitation",
    "Job",
    "JobEvent", "Membership", "Organization", "OrganizationEvent", "Project", "RunTimeStat",
    "StoredCheckpoint", "Tier", "UsageAccount", "WebhookDelivery", "WebhookEndpoint",
]
