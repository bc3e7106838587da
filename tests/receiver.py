"""A webhook receiver on 127.0.0.1 for the notification tests: an HTTP server in a thread that keeps
every POST (its path, its JSON body, when it arrived and when it was answered)."""

from __future__ import annotations

import http.server
import json
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Post:
    """One POST received: its path, its body as JSON, when it arrived and when it was answered
    (``time.monotonic()``)."""

    path: str
    body: dict[str, Any]
    arrived: float
    answered: float


class Receiver:
    """The server's state: the POSTs so far, and how long it waits before answering one."""

    def __init__(self, delay_s: float = 0.0) -> None:
        self.delay_s = delay_s
        self.posts: list[Post] = []
        self.port = 0
        self._got = threading.Condition()

    def url(self, path: str = "hook") -> str:
        """The apprise URL that posts JSON here: ``json://127.0.0.1:PORT/path``."""
        return f"json://127.0.0.1:{self.port}/{path}"

    def wait(self, count: int = 1, timeout_s: float = 20.0) -> list[Post]:
        """The POSTs, once ``count`` were answered (fails after ``timeout_s``)."""
        with self._got:
            assert self._got.wait_for(lambda: len(self.posts) >= count, timeout_s), self.posts
            return list(self.posts)

    def _handler(self) -> type[http.server.BaseHTTPRequestHandler]:
        receiver = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                arrived = time.monotonic()
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                time.sleep(receiver.delay_s)
                self.send_response(200)
                self.end_headers()
                self.wfile.write(b"ok")
                with receiver._got:
                    receiver.posts.append(Post(self.path, body, arrived, time.monotonic()))
                    receiver._got.notify_all()

            def log_message(self, format: str, *args: Any) -> None:
                pass

        return Handler


@contextmanager
def receiving(delay_s: float = 0.0) -> Iterator[Receiver]:
    """A ``Receiver`` listening on 127.0.0.1 for the duration."""
    receiver = Receiver(delay_s)
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), receiver._handler())
    receiver.port = server.server_address[1]
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield receiver
    finally:
        server.shutdown()
        server.server_close()


def closed_port() -> int:
    """A port on 127.0.0.1 nothing listens on (bound, then released)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
    return port
