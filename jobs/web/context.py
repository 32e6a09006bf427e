"""What every dashboard page says: the user's organizations an operator suspended."""

from __future__ import annotations

from django.http import HttpRequest

from jobs.models import Organization


def suspended_organizations(request: HttpRequest) -> dict:
    """Read only by a page that shows it (the dashboard's), not by every admin page."""
    def suspended() -> list[Organization]:
        if not request.user.is_authenticated:
            return []
        return list(Organization.objects.filter(memberships__user=request.user,
                                                suspended_at__isnull=False).order_by("slug"))
    return {"suspended_organizations": suspended}
