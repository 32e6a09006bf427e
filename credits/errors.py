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
