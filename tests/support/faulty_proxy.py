"""A proxy between a client and the service that loses answers on demand, as a network or a
load balancer in the middle does."""

from __future__ import annotations

import http.client
import threading
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

_HOP = {"connection", "keep-alive", "transfer-encoding", "content-length"}


class FaultyProxy:
    """Forwards each request to `upstream`. `faults` is used one per request, in order (none
    left: forward): "drop" forwards the request and closes the connection without relaying the
    answer (the service did the work, the client never hears of it); "cut" relays the
    answer's head and half its content, then closes (a download cut off halfway); "busy"
    answers 503 with `Retry-After: 1` and forwards nothing (a load balancer during a deploy).
    `seen` holds (method, path, headers) of every request."""

    def __init__(self, upstream: str) -> None:
        self.faults: list[str] = []
        self.seen: list[tuple[str, str, dict[str, str]]] = []
        target = urllib.parse.urlsplit(upstream)
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def _handle(self):
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                proxy.seen.append((self.command, self.path, dict(self.headers)))
                fault = proxy.faults.pop(0) if proxy.faults else None
                if fault == "busy":
                    self.send_response(503)
                    self.send_header("Retry-After", "1")
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                upstream = http.client.HTTPConnection(target.hostname, target.port, timeout=30)
                upstream.request(self.command, self.path, body=body or None,
                                 headers={k: v for k, v in self.headers.items()
                                          if k.lower() not in _HOP})
                answer = upstream.getresponse()
                content = answer.read()
                upstream.close()
                if fault == "drop":
                    self.close_connection = True
                    return
                self.send_response(answer.status)
                for key, value in answer.getheaders():
                    if key.lower() not in _HOP:
                        self.send_header(key, value)
                self.send_header("Content-Length", str(len(content)))
                self.end_headers()
                if fault == "cut":
                    self.wfile.write(content[:len(content) // 2])
                    self.close_connection = True
                    return
                self.wfile.write(content)

            do_GET = do_POST = do_PATCH = do_DELETE = _handle  # noqa: N815 - http.server calls these

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_port}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
