"""Refusals of the ledger that a client can act on."""

from __future__ import annotations

from jobs.services.errors import ServiceError


class InsufficientCredits(ServiceError):
    """The organization's spendable credits do not cover what the job may cost."""

    code = "insufficient_credits"
    status = 402

    def __init__(self, *, needed: int, available: int):
        super().__init__(f"this job may cost {needed} credits and {available} are available",
                         code=self.code)
        self.details = {"needed": needed, "available": available}


class BudgetExceeded(ServiceError):
    """The job would take a project, a member or the organization past its monthly budget."""

    code = "budget_exceeded"
    status = 402

    def __init__(self, *, scope: str, limit: int, committed: int, needed: int):
        super().__init__(f"this job may cost {needed} credits; the budget of {scope} has "
                         f"{max(0, limit - committed)} of {limit} left this month", code=self.code)
        self.details = {"scope": scope, "monthly_limit": limit, "committed": committed,
                        "needed": needed}
