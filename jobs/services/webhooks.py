"""Tell an organization's endpoints that a job ended (or started, is being preempted, waits
to retry: each endpoint chooses its `events`): at least once, signed, retried.

A move writes one delivery per subscribed endpoint in the transaction of the move itself
(`notify_job_moved`, called by jobs/transitions.py), so an end is never lost between the
database and the broker. A sender claims a due delivery by pushing its due time forward (a
conditional update: two senders never post it at once), posts it outside any transaction,
then records the answer. A refusal or an unreachable endpoint is tried again with backoff
by the sweep (beat) until `MAX_ATTEMPTS`; receivers deduplicate by the delivery id.

Each send resolves the endpoint's host once, refuses it unless every address is public, and
posts to those very addresses (jobs/services/webhook_http.py); a redirect is a failed
attempt, never followed: a tenant's URL reaches nothing else of the service's network.

Signature: `X-Gpusched-Signature: sha256=HMAC(secret, "<timestamp>.<body>")` with the
timestamp in `X-Gpusched-Timestamp`, so a receiver can refuse replays of old notices. For a
day after its secret is rotated an endpoint's notices carry a second signature, under the
secret before (`sha256=<new>,sha256=<old>`): a receiver accepts the notice if one matches.
"""

from __future__ import annotations

import hashlib
import hmac
import http.client
import ipaddress
import json
import logging
import socket
import time
import urllib.parse
from datetime import datetime, timedelta

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from jobs.models import Job, WebhookDelivery, WebhookEndpoint
from jobs.models.webhook import EVENTS
from jobs.services import webhook_http
from jobs.services.outputs import output_path
from jobs.states import JobState

log = logging.getLogger(__name__)
MAX_ATTEMPTS = 8
TIMEOUT_S = 5.0  # for each wait: to connect, and for each piece of the answer
SEND_DEADLINE_S = 30.0  # for a whole send, well inside the claim: never two senders at once
CLAIM_S = 60  # a claimed delivery is due again after this if its sender died meanwhile
Status = WebhookDelivery.Status


def notify_job_moved(job: Job) -> None:
    """Owe each active endpoint of the job's organization that subscribed to the state the
    job just moved into a notice of it (call inside the transaction of the move); they are
    sent once it commits."""
    event = f"job.{job.state.lower()}"
    if event in EVENTS:
        _owe(job.organization_id, event, lambda: _payload(job, event), job=job)


def notify_job_erased(job: Job) -> None:
    """Owe the endpoints that subscribed to job.erased a notice that the job's content is
    gone (jobs/services/erasure.py), inside the erasure's transaction: a receiver that kept
    a copy of its output, a CDN, a user's mailbox, deletes it too."""
    _owe(job.organization_id, "job.erased", lambda: _payload(job, "job.erased"), job=job)


def notify_organization(organization_id: int, event: str, payload: dict) -> None:
    """Owe the organization's endpoints that subscribed to `event` a notice of it, sent once
    the current transaction commits (credits.low: credits/services/alerts.py)."""
    _owe(organization_id, event, lambda: {"event": event, **payload})


def _owe(organization_id: int, event: str, payload, job: Job | None = None) -> None:
    endpoints = [e for e in WebhookEndpoint.objects.filter(
        organization_id=organization_id, active=True) if event in e.events]
    if not endpoints:
        return
    now, body = timezone.now(), payload()
    made = WebhookDelivery.objects.bulk_create(
        WebhookDelivery(endpoint=e, job=job, event=event, payload=body, next_attempt_at=now)
        for e in endpoints)
    ids = [d.pk for d in made]
    transaction.on_commit(lambda: send_later(ids))


def _payload(job: Job, event: str) -> dict:
    """What a notice says (`Notice` in jobs/api/openapi.py), credits as settled by the move."""
    from credits.services.holds import job_credits  # the ledger's models import the jobs app

    return {"event": event, "job": {
        "id": job.pk, "state": job.state, "hold": job.hold or None, "labels": job.labels,
        "error_code": job.error_code,
        "result": job.result, "output_url": output_path(job),
        "finished_at": job.finished_at.isoformat() if job.finished_at else None,
        "retries": job.retries,
        "retry_at": job.retry_at.isoformat() if job.state == JobState.RETRY_WAIT else None,
        "credits": job_credits(job)}}


def send_later(ids: list[int]) -> None:
    from jobs.tasks import deliver_webhook

    try:
        for pk in ids:
            deliver_webhook.delay(pk)
    except Exception:  # the sweep sends what is due; never fail the move that owed them
        log.warning("could not queue webhook deliveries %s", ids, exc_info=True)


def url_refusal(url: str) -> str:
    """Why a webhook may not go to `url`, or "": it must resolve, and only to public
    addresses unless GPUSCHED_WEBHOOK_ALLOW_PRIVATE (a tenant's URL must not reach the
    service's own network: its database, its metadata service, its admin)."""
    if settings.GPUSCHED_WEBHOOK_ALLOW_PRIVATE:
        return ""
    return _checked(urllib.parse.urlsplit(url).hostname or "")[1]


def _checked(host: str) -> tuple[list[str], str]:
    """What `host` resolves to now, in the resolver's order, and why a webhook may not go
    there ("" if it may). The refusal never names an address: it would map the service's
    network for whoever names its hosts."""
    try:
        found = list(dict.fromkeys(info[4][0] for info in socket.getaddrinfo(host, None)))
    except (OSError, UnicodeError):
        return [], f"{host!r} does not resolve"
    if settings.GPUSCHED_WEBHOOK_ALLOW_PRIVATE or all(
            ipaddress.ip_address(a.split("%")[0]).is_global for a in found):
        return found, ""
    return [], f"{host!r} resolves to a non-public address"


def webhook_deliver(delivery_id: int) -> str | None:
    """Post one due delivery if no other sender holds it; its status after, or None."""
    now = timezone.now()
    until = now + timedelta(seconds=CLAIM_S)
    claimed = WebhookDelivery.objects.filter(
        pk=delivery_id, status=Status.PENDING, next_attempt_at__lte=now).update(
        next_attempt_at=until)
    if not claimed:
        return None
    delivery = WebhookDelivery.objects.select_related("endpoint").get(pk=delivery_id)
    error = _post(delivery)
    fields: dict = {"attempts": delivery.attempts + 1, "last_error": error[:300]}
    if not error:
        fields.update(status=Status.DELIVERED, delivered_at=timezone.now())
    elif fields["attempts"] >= MAX_ATTEMPTS:
        fields["status"] = Status.FAILED
    else:  # 30 s, 1 min, 2 min, ... at most an hour
        wait = min(30 * 2 ** delivery.attempts, 3600)
        fields["next_attempt_at"] = timezone.now() + timedelta(seconds=wait)
    # under the claim it made: a sender that outlived it (a process stalled) writes nothing
    # over the one that claimed the delivery after it
    if not WebhookDelivery.objects.filter(pk=delivery_id, next_attempt_at=until).update(
            **fields):
        log.warning("delivery %s: its claim ran out while it was sent", delivery_id)
    return fields.get("status", Status.PENDING)


def _post(delivery: WebhookDelivery) -> str:
    """Send it; "" if the endpoint took it (2xx), else why not."""
    url = delivery.endpoint.url
    # resolved once, here, and posted to what was checked: a second look-up could answer
    # the service's own network (DNS rebinding)
    addresses, refusal = _checked(urllib.parse.urlsplit(url).hostname or "")
    if refusal:
        return f"refused: {refusal}"
    body = json.dumps({**delivery.payload, "delivery": delivery.pk}).encode()
    stamp = str(int(time.time()))
    headers = {
        "Content-Type": "application/json", "User-Agent": "gpusched-webhooks",
        "X-Gpusched-Event": delivery.event, "X-Gpusched-Delivery": str(delivery.pk),
        "X-Gpusched-Timestamp": stamp,
        "X-Gpusched-Signature": signatures(delivery.endpoint, stamp, body)}
    try:
        status = webhook_http.post(url, addresses, body, headers, TIMEOUT_S, SEND_DEADLINE_S)
    except (OSError, ValueError, http.client.HTTPException) as exc:
        return f"unreachable: {exc}"
    if 300 <= status < 400:  # followed, it would reach wherever the tenant points it
        return f"HTTP {status}: redirects are not followed"
    return "" if 200 <= status < 300 else f"HTTP {status}"


def signatures(endpoint: WebhookEndpoint, stamp: str, body: bytes) -> str:
    """`sha256=<hex>` under each secret that signs now, the current one first, comma
    separated: during a rotation a receiver holding either secret finds its own."""
    signed = stamp.encode() + b"." + body
    return ",".join(f"sha256={hmac.new(secret.encode(), signed, hashlib.sha256).hexdigest()}"
                    for secret in endpoint.signing_secrets(timezone.now()))


EXPIRE_BATCH = 5_000  # deliveries one sweep deletes at most: it stays short, the next goes on


def expire_deliveries(*, now: datetime) -> int:
    """Delete deliveries that arrived or were given up past GPUSCHED_WEBHOOK_RETENTION_DAYS
    after they were made; returns how many. A pending one stays, however old: it is owed."""
    days = settings.GPUSCHED_WEBHOOK_RETENTION_DAYS
    if days <= 0:
        return 0
    old = (WebhookDelivery.objects.exclude(status=Status.PENDING)
           .filter(created_at__lt=now - timedelta(days=days)).order_by("created_at"))
    ids = list(old.values_list("pk", flat=True)[:EXPIRE_BATCH])
    # conditional again: one sent again meanwhile is pending, owed, and stays
    deleted, _ = WebhookDelivery.objects.filter(pk__in=ids).exclude(
        status=Status.PENDING).delete()
    return deleted


def webhooks_sweep(limit: int = 100) -> int:
    """Send the deliveries that are due (retries, and any whose first send was lost)."""
    due = list(WebhookDelivery.objects.filter(
        status=Status.PENDING, next_attempt_at__lte=timezone.now())
        .order_by("next_attempt_at").values_list("pk", flat=True)[:limit])
    for pk in due:
        webhook_deliver(pk)
    return len(due)
