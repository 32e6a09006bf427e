"""An HTTP server on localhost that records each POST it gets: a webhook receiver."""

from __future__ import annotations

import ssl
import threading
import time
from http.server import BaseHTTPRequestHandler, HTTPServer


class Receiver:
    """Answers every POST with `status` and `headers`; `posts` holds (headers, body) in
    arrival order, `seen` "METHOD path" of every request, a GET's too (what a followed
    redirect sends). With `tls` (a server context) it listens for HTTPS."""

    def __init__(self, tls: ssl.SSLContext | None = None) -> None:
        self.status = 200
        self.headers: dict[str, str] = {}
        self.drip_s = 0.0  # > 0: the answer comes a byte at a time, this long apart
        self.on_post = None  # run in the receiver's thread before it answers a POST
        self.posts: list[tuple[dict[str, str], bytes]] = []
        self.seen: list[str] = []
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self):  # noqa: N802 - the name http.server calls
                receiver.seen.append(f"GET {self.path}")
                self.send_response(405)
                self.end_headers()

            def do_POST(self):  # noqa: N802
                receiver.seen.append(f"POST {self.path}")
                body = self.rfile.read(int(self.headers["Content-Length"]))
                receiver.posts.append((dict(self.headers), body))
                if receiver.on_post is not None:
                    receiver.on_post()
                if receiver.drip_s:  # each byte well within a socket's timeout
                    for byte in f"HTTP/1.1 {receiver.status} OK\r\n\r\n".encode():
                        time.sleep(receiver.drip_s)
                        self.wfile.write(bytes([byte]))
                        self.wfile.flush()
                    return
                self.send_response(receiver.status)
                for name, value in receiver.headers.items():
                    self.send_header(name, value)
                self.end_headers()

            def log_message(self, *args):
                pass

        self.server = HTTPServer(("127.0.0.1", 0), Handler)
        if tls:
            self.server.socket = tls.wrap_socket(self.server.socket, server_side=True)
        self.port = self.server.server_port
        self.url = f"{'https' if tls else 'http'}://127.0.0.1:{self.port}/hook"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
