"""Checking a webhook notice from gpusched before believing it (README.md, webhooks).

    from gpusched_client.webhooks import InvalidNotice, verify
    notice = verify(request.body, request.headers, secret=os.environ["GPUSCHED_WEBHOOK_SECRET"])

A notice is signed `sha256=HMAC(secret, "<X-Gpusched-Timestamp>.<body>")`, under each secret
that signs it (during a rotation, the new and the one before). A notice older than
`tolerance_s` is refused too, so one captured on the way cannot be replayed later; receivers
deduplicate by its `delivery` id, since a notice may come more than once.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import time
from collections.abc import Mapping, Sequence

from gpusched_client.errors import Json


class InvalidNotice(Exception):
    """Not signed by the secret given, or too old, or not a notice at all."""


def verify(body: bytes, headers: Mapping[str, str], secret: str | Sequence[str], *,
           tolerance_s: float = 300.0, now: float | None = None) -> Json:
    """The notice, once one of its signatures is under `secret` (or one of several, while
    a receiver holds two) and its timestamp within `tolerance_s` of `now`."""
    lower = {k.lower(): v for k, v in headers.items()}
    stamp, signed = lower.get("x-gpusched-timestamp", ""), lower.get("x-gpusched-signature", "")
    if not stamp.isdigit():
        raise InvalidNotice("no X-Gpusched-Timestamp")
    if abs((time.time() if now is None else now) - int(stamp)) > tolerance_s:
        raise InvalidNotice(f"signed at {stamp}, more than {tolerance_s:g} s from now")
    secrets = [secret] if isinstance(secret, str) else list(secret)
    mine = {hmac.new(s.encode(), stamp.encode() + b"." + body, hashlib.sha256).hexdigest()
            for s in secrets}
    theirs = [part.removeprefix("sha256=") for part in signed.split(",")]
    if not any(hmac.compare_digest(m, t) for m in mine for t in theirs):
        raise InvalidNotice("not signed by this secret")
    try:
        return json.loads(body)
    except ValueError as exc:
        raise InvalidNotice("not JSON") from exc
