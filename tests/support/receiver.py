"""An HTTP server on localhost that records each POST it gets: a webhook receiver."""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, HTTPServer


class Receiver:
    """Answers every POST with `status`; `posts` holds (headers, body) in arrival order."""

    def __init__(self) -> None:
        self.status = 200
        self.posts: list[tuple[dict[str, str], bytes]] = []
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):  # noqa: N802 - the name http.server calls
                body = self.rfile.read(int(self.headers["Content-Length"]))
                receiver.posts.append((dict(self.headers), body))
                self.send_response(receiver.status)
                self.end_headers()

            def log_message(self, *args):
                pass

        self.server = HTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_port}/hook"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
