"""Post a webhook to the addresses its host was checked at (jobs/services/webhooks.py), never
to what the name resolves to a moment later: a name that answers a public address to the
check and the service's own to the connection (DNS rebinding) reaches only the public one.
A redirect is never followed: it is the receiver's answer, not a place to go."""

from __future__ import annotations

import contextlib
import http.client
import socket
import ssl
import threading
import urllib.parse


class _Pinned(http.client.HTTPConnection):
    """Connects to `addresses` (checked already) instead of resolving the host again; the
    Host header still names the host."""

    def __init__(self, host: str, port: int, addresses: list[str], timeout: float) -> None:
        super().__init__(host, port, timeout=timeout)
        self.addresses = addresses

    def connect(self) -> None:
        self.sock = _open(self.addresses, self.port, self.timeout)


class _PinnedTLS(_Pinned):
    """As `_Pinned`, over TLS: the server name and the certificate checked are the host's."""

    default_port = 443

    def connect(self) -> None:
        super().connect()
        self.sock = ssl.create_default_context().wrap_socket(
            self.sock, server_hostname=self.host)


def _open(addresses: list[str], port: int, timeout: float) -> socket.socket:
    """A connection to the first of `addresses` that takes one, in the resolver's order, as
    socket.create_connection tries a name's addresses (an IPv6 one may be unroutable)."""
    error = OSError("no address to connect to")
    for address in addresses:
        try:
            return socket.create_connection((address, port), timeout)
        except OSError as exc:
            error = exc
    raise error


def post(url: str, addresses: list[str], body: bytes, headers: dict[str, str],
         timeout: float, deadline: float) -> int:
    """POST `body` to `url` through one of `addresses` within `deadline` seconds; the
    answer's status, a redirect's too. Raises OSError, ValueError or
    http.client.HTTPException when there is none."""
    parts = urllib.parse.urlsplit(url)
    if parts.scheme not in ("http", "https"):
        raise ValueError(f"unknown url type: {parts.scheme!r}")
    tls = parts.scheme == "https"
    connection = (_PinnedTLS if tls else _Pinned)(
        parts.hostname or "", parts.port or (443 if tls else 80), addresses, timeout)
    target = urllib.parse.urlunsplit(("", "", parts.path or "/", parts.query, ""))
    # `timeout` bounds each wait; a receiver that sends a byte within each still never
    # holds a send past `deadline`: its socket is shut under it, and the wait raises
    cut = threading.Timer(deadline, _shut, args=(connection,))
    cut.start()
    try:
        connection.request("POST", target, body=body, headers=headers)
        return connection.getresponse().status
    finally:
        cut.cancel()
        connection.close()


def _shut(connection: http.client.HTTPConnection) -> None:
    with contextlib.suppress(OSError, AttributeError):  # closed already, or never opened
        connection.sock.shutdown(socket.SHUT_RDWR)
