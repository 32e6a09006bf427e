"""HTTP to gpusched's API, with the retries only a call that is safe to repeat gets.

A call is safe to repeat when it is a read, or changes nothing the second time (a hold), or
carries an Idempotency-Key (a submission: the server answers a repeat with the job the first
made). Such a call is tried again after a lost answer (the connection dropped, timed out) or
a 502/503/504, backing off with jitter, and after a 429 or 503 that says when
(`Retry-After`), when that is no longer than `max_retry_wait_s`. Anything else is the answer.
"""

from __future__ import annotations

import http.client
import json
import random
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import BinaryIO

from gpusched_client.errors import ApiError, Json, Unreachable

_BUSY = {502, 503, 504}  # a proxy or a deploy between the client and the service
_MAYBE_DONE = {502, 504}  # the proxy may have passed the request on before it failed


@dataclass
class Answer:
    status: int
    headers: dict[str, str]
    content: bytes

    def json(self) -> Json:
        return json.loads(self.content) if self.content else {}


@dataclass
class Transport:
    base_url: str
    api_key: str
    timeout: float = 30.0
    retries: int = 4
    backoff_s: float = 0.5
    max_retry_wait_s: float = 60.0
    sleep: Callable[[float], None] = field(default=time.sleep, repr=False)

    def request(self, method: str, path: str, *, body: object = None,
                query: list[tuple[str, str]] | None = None, headers: dict[str, str] | None = None,
                safe: bool = False, into: BinaryIO | None = None) -> Answer:
        """The answer to a call; ApiError for a 4xx/5xx, Unreachable when no answer came back
        on any try. With `into`, a successful answer's content is written there instead, and
        a try after one cut short asks only for the rest (`_Sink`)."""
        url = self._url(path, query)
        sink = None if into is None else _Sink(into)
        data = None if body is None else json.dumps(body).encode()
        sent = {"Authorization": f"Bearer {self.api_key}", "Accept": "application/json",
                **({"Content-Type": "application/json"} if data is not None else {}),
                **(headers or {})}
        tries = 1 + (self.retries if safe else 0)
        lost = False  # an earlier try may have been done without its answer reaching us
        for n in range(tries):
            last = n == tries - 1
            try:
                answer = self._send(method, url, data, sent, sink)
            except (urllib.error.URLError, http.client.HTTPException, OSError) as exc:
                if last:
                    raise Unreachable(f"{method} {url}: {exc}") from exc
                lost = True
                self.sleep(self._backoff(n))
                continue
            if answer.status < 400:
                return answer
            error = _error(answer)
            error.after_lost_answer = lost
            lost = lost or answer.status in _MAYBE_DONE
            wait = self._retry_wait(answer, error, n)
            if last or wait is None:
                raise error
            self.sleep(wait)
        raise AssertionError("unreachable")  # the loop returns or raises on its last try

    def _url(self, path: str, query: list[tuple[str, str]] | None) -> str:
        if path.startswith(("http://", "https://")):  # a `next` link: its path, our server
            parts = urllib.parse.urlsplit(path)
            path = parts.path + (f"?{parts.query}" if parts.query else "")
        url = self.base_url.rstrip("/") + path
        if query:
            url += ("&" if "?" in url else "?") + urllib.parse.urlencode(query)
        return url

    def _send(self, method: str, url: str, data: bytes | None, headers: dict[str, str],
              sink: _Sink | None) -> Answer:
        headers = {**headers, **(sink.resume_headers() if sink else {})}
        request = urllib.request.Request(url, data=data, headers=headers, method=method)
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as response:
                if sink is None:
                    return Answer(response.status, _lower(response.headers), response.read())
                sink.take(response.status, _lower(response.headers), response)
                return Answer(response.status, _lower(response.headers), b"")
        except urllib.error.HTTPError as exc:  # a 4xx/5xx is an answer, not a lost one
            with exc:
                return Answer(exc.code, _lower(exc.headers), exc.read())

    def _retry_wait(self, answer: Answer, error: ApiError, n: int) -> float | None:
        """How long to wait before the next try, or None when this answer is final."""
        if error.retry_after is not None and answer.status in {429, 503}:
            return error.retry_after if error.retry_after <= self.max_retry_wait_s else None
        return self._backoff(n) if answer.status in _BUSY else None

    def _backoff(self, n: int) -> float:
        return random.uniform(0, min(self.max_retry_wait_s, self.backoff_s * 2 ** n))


@dataclass
class _Sink:
    """Where a download goes, checked whole against its Content-Length. A try after one cut
    short asks for the rest of the same file only (`Range` from what was written, `If-Range`
    its ETag), appends what the service answers as that rest (206), and writes from the
    start whatever else it answers (the file changed, or a server that sends everything)."""

    out: BinaryIO
    etag: str | None = None

    def resume_headers(self) -> dict[str, str]:
        written = self.out.tell()
        return {"Range": f"bytes={written}-", "If-Range": self.etag} if (
            written and self.etag) else {}

    def take(self, status: int, headers: dict[str, str], content: BinaryIO) -> None:
        written = self.out.tell()
        rest = status == 206 and headers.get("content-range", "").startswith(
            f"bytes {written}-")
        if not rest:
            self.out.seek(0)
            self.out.truncate()
        self.etag = headers.get("etag")
        expected, got = headers.get("content-length"), 0
        while chunk := content.read(1 << 20):
            self.out.write(chunk)
            got += len(chunk)
        # urllib ends a body the connection cut short without a word: a truncated file
        # must not pass for the output
        if expected is not None and got < int(expected):
            raise http.client.IncompleteRead(b"", int(expected) - got)


def _lower(headers) -> dict[str, str]:
    return {k.lower(): v for k, v in headers.items()}


def _error(answer: Answer) -> ApiError:
    try:
        body = answer.json()
    except ValueError:
        body = {}
    error = body.get("error") if isinstance(body, dict) else None
    error = error if isinstance(error, dict) else {}
    retry_after = answer.headers.get("retry-after")
    return ApiError(answer.status, error.get("code", f"http_{answer.status}"),
                    error.get("message", answer.content[:200].decode(errors="replace")),
                    body=error, retry_after=_seconds(retry_after))


def _seconds(value: str | None) -> float | None:
    try:
        return max(0.0, float(value)) if value is not None else None
    except ValueError:  # an HTTP date: a server of ours never sends one
        return None
