"""The address a request came from, as the guards that count by address read it. Behind a
TLS proxy or a load balancer every request arrives from the proxy's address; each proxy
appends the address it was reached from to X-Forwarded-For, so with GPUSCHED_PROXY_HOPS
proxies in front the client is the entry that many from its end. Entries before it are the
client's own to write, and are never read: a guesser could name any address there."""

from __future__ import annotations

from django.conf import settings
from django.http import HttpRequest


def client_address(request: HttpRequest) -> str:
    remote = request.META.get("REMOTE_ADDR", "")
    hops = settings.GPUSCHED_PROXY_HOPS
    if not hops:
        return remote
    chain = [a.strip() for a in request.META.get("HTTP_X_FORWARDED_FOR", "").split(",")]
    chain = [a for a in chain if a]
    # fewer entries than proxies: a request that came past some of them (a probe from inside)
    return chain[-min(hops, len(chain))] if chain else remote
