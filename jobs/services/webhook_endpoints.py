"""An organization's webhook endpoints and what was sent to them: made and removed through the
API (a key acts for the whole organization) or the dashboard (by an owner); each delivery,
its answers and whether it arrived, read back; one that failed, or that a receiver lost,
sent again. A delivery sent again keeps its id, so a receiver that deduplicates by it (as
it must: deliveries are at least once) takes it once."""

from __future__ import annotations

from datetime import timedelta

from django.db import transaction
from django.db.models import QuerySet
from django.utils import timezone

from jobs.models import ApiKey, Organization, WebhookDelivery, WebhookEndpoint
from jobs.services.audit import audit
from jobs.services.errors import Conflict, NotFound, ValidationFailed
from jobs.services.tenancy import owner_or_key
from jobs.services.webhooks import send_later, url_refusal

MAX_WEBHOOKS = 10  # endpoints per organization
Status = WebhookDelivery.Status


def _by_owner(organization: Organization, user, api_key: ApiKey | None) -> None:
    owner_or_key(organization, user=user, api_key=api_key, manages="its webhooks")


def webhook_endpoint_create(*, organization: Organization, url: str,
                            events: list[str] | None = None, user=None,
                            api_key: ApiKey | None = None) -> WebhookEndpoint:
    """A new endpoint (`events`: validated names; None for the default, a job's end). Its
    secret is on the instance returned: shown once, by the caller. `api_key`: the client's
    key that asked, for the audit trail."""
    _by_owner(organization, user, api_key)
    refusal = url_refusal(url)
    if refusal:
        raise ValidationFailed(refusal, code="webhook_url_not_allowed", field="url")
    with transaction.atomic():  # two at once cannot pass the limit together
        Organization.objects.select_for_update(no_key=True).get(pk=organization.pk)
        if WebhookEndpoint.objects.filter(organization=organization).count() >= MAX_WEBHOOKS:
            raise Conflict(f"at most {MAX_WEBHOOKS} webhook endpoints per organization",
                           code="too_many_webhooks")
        hook = WebhookEndpoint.objects.create(
            organization=organization, url=url,
            **({"events": events} if events is not None else {}))
        audit(organization, "webhook.added", user=user, api_key=api_key, url=url,
              events=hook.events)
        return hook


def webhook_endpoint_delete(*, organization: Organization, hook_id: int, user=None,
                            api_key: ApiKey | None = None) -> None:
    """Remove an endpoint and what it was owed: nothing more is sent to it."""
    _by_owner(organization, user, api_key)
    with transaction.atomic():
        hook = WebhookEndpoint.objects.filter(organization=organization, pk=hook_id).first()
        if hook is None:
            raise NotFound("no such webhook endpoint")
        hook.delete()
        audit(organization, "webhook.removed", user=user, api_key=api_key, url=hook.url)


ROTATION_OVERLAP = timedelta(days=1)  # the old secret signs too, while receivers move


def webhook_secret_rotate(*, organization: Organization, hook_id: int, user=None,
                          api_key: ApiKey | None = None) -> WebhookEndpoint:
    """A new secret for the endpoint, on the instance returned (shown once, by the caller).
    Notices are signed with the one before too for ROTATION_OVERLAP, so that receivers move
    to the new one without refusing any; a second rotation meanwhile ends that at once."""
    _by_owner(organization, user, api_key)
    with transaction.atomic():
        hook = (WebhookEndpoint.objects.select_for_update()
                .filter(organization=organization, pk=hook_id).first())
        if hook is None:
            raise NotFound("no such webhook endpoint")
        hook.previous_secret = hook.secret
        hook.secret = WebhookEndpoint._meta.get_field("secret").get_default()
        hook.previous_secret_until = timezone.now() + ROTATION_OVERLAP
        hook.save(update_fields=["secret", "previous_secret", "previous_secret_until"])
        audit(organization, "webhook.secret_rotated", user=user, api_key=api_key,
              url=hook.url, previous_valid_until=hook.previous_secret_until.isoformat())
    return hook


def deliveries_of(*, organization: Organization, hook_id: int) -> QuerySet[WebhookDelivery]:
    """The endpoint's deliveries, newest first."""
    if not WebhookEndpoint.objects.filter(organization=organization, pk=hook_id).exists():
        raise NotFound("no such webhook endpoint")
    return WebhookDelivery.objects.filter(endpoint_id=hook_id).order_by("-pk")


def webhook_redeliver(*, organization: Organization, hook_id: int, delivery_id: int,
                      user=None, api_key: ApiKey | None = None) -> WebhookDelivery:
    """Send a delivery that failed or arrived again, now, with a fresh round of attempts.
    One still pending is left to its own schedule."""
    _by_owner(organization, user, api_key)
    mine = deliveries_of(organization=organization, hook_id=hook_id).filter(pk=delivery_id)
    with transaction.atomic():
        # conditional: a sender that holds it pending is never raced
        if mine.exclude(status=Status.PENDING).update(
                status=Status.PENDING, attempts=0, next_attempt_at=timezone.now(),
                delivered_at=None):
            audit(organization, "webhook.resent", user=user, api_key=api_key,
                  delivery=delivery_id, url=mine.values_list("endpoint__url", flat=True)[0])
            transaction.on_commit(lambda: send_later([delivery_id]))
    delivery = mine.first()
    if delivery is None:
        raise NotFound("no such delivery")
    return delivery


PING = "ping"  # a test notice, sent whatever the endpoint's events


def webhook_ping(*, organization: Organization, hook_id: int, user=None,
                 api_key: ApiKey | None = None) -> WebhookDelivery:
    """Send the endpoint a signed test notice now, as any delivery (retried, read back), so
    that its owner sees the receiver answer and check the signature before a job's notice
    depends on it."""
    _by_owner(organization, user, api_key)
    with transaction.atomic():
        hook = WebhookEndpoint.objects.filter(organization=organization, pk=hook_id).first()
        if hook is None:
            raise NotFound("no such webhook endpoint")
        now = timezone.now()
        delivery = WebhookDelivery.objects.create(
            endpoint=hook, event=PING, next_attempt_at=now,
            payload={"event": PING, "organization": organization.slug, "endpoint": hook.pk,
                     "sent_at": now.isoformat()})
        transaction.on_commit(lambda: send_later([delivery.pk]))
    return delivery
