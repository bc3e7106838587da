"""What every mock model API shares: scripted turns, the log of requests, a threaded server.

A test scripts the turns the model gives (``Reply``: text, tool calls, usage; ``Failure``: an HTTP
error with the real body) and the server answers each model request with the next one; requests a
client makes on the side (titles, token counts, quota checks) are answered by ``side`` without using
a turn. Every request is logged (``MockAPI.requests``) with its path, headers and JSON body, and every
turn served is logged with it (``MockAPI.served``), so a test compares the ledger with what was served.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterable, Iterator
from dataclasses import astuple, dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Self


@dataclass(frozen=True, slots=True)
class ToolCall:
    """A tool the model calls: its name and arguments (``id``: made up when empty)."""

    name: str
    arguments: dict[str, Any]
    id: str = ""


@dataclass(frozen=True, slots=True)
class Usage:
    """The tokens a turn reports: input not read from a cache, output (thoughts excluded), cache
    reads, cache writes, and thinking tokens where the protocol reports them apart."""

    input: int = 0
    output: int = 0
    cache_read: int = 0
    cache_write: int = 0
    thoughts: int = 0

    def __add__(self, other: Usage) -> Usage:
        return Usage(*(a + b for a, b in zip(astuple(self), astuple(other), strict=True)))


@dataclass(frozen=True, slots=True)
class Reply:
    """One model turn: its text, its tool calls, its usage, its reasoning text (where streamed), and
    the model it names (``""``: the one asked for)."""

    text: str = ""
    tool_calls: tuple[ToolCall, ...] = ()
    usage: Usage = Usage()
    thinking: str = ""
    model: str = ""


@dataclass(frozen=True, slots=True)
class Failure:
    """An HTTP error answer: its status, its body (JSON when a dict) and extra headers."""

    status: int
    body: dict[str, Any] | str
    headers: tuple[tuple[str, str], ...] = ()


Turn = Reply | Failure


@dataclass(slots=True)
class Request:
    """One request the client sent."""

    method: str
    path: str
    headers: dict[str, str]
    body: Any


@dataclass(slots=True)
class Served:
    """A model request and the turn that answered it."""

    request: Request
    turn: Turn


class Script:
    """Turns served in order; past the last one, ``after`` (by default a plain reply ``"done"``)."""

    def __init__(self, turns: Iterable[Turn], after: Turn | None = None) -> None:
        self.turns = list(turns)
        self.after = after if after is not None else Reply(text="done", usage=Usage(input=1, output=1))
        self.used = 0
        self.lock = threading.Lock()

    def __call__(self, request: Request) -> Turn:
        with self.lock:
            if self.used < len(self.turns):
                self.used += 1
                return self.turns[self.used - 1]
            return self.after


@dataclass
class MockAPI:
    """A model API on 127.0.0.1: ``url`` once started (``with MockAPI(...) as api``).

    Subclasses say which requests are model turns (``is_turn``), how a turn is streamed (``stream``),
    and what a side request gets (``side``)."""

    script: Callable[[Request], Turn]
    requests: list[Request] = field(default_factory=list)
    served: list[Served] = field(default_factory=list)
    url: str = ""
    _server: ThreadingHTTPServer | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock)

    # -- what a protocol says
    content_type = "text/event-stream"

    def is_turn(self, request: Request) -> bool:
        """Whether ``request`` asks the model for a turn (the rest are side requests)."""
        raise NotImplementedError

    def stream(self, request: Request, reply: Reply) -> Iterator[bytes]:
        """The body chunks of a successful turn, as the real API streams them."""
        raise NotImplementedError

    def side(self, request: Request) -> tuple[int, Any]:
        """The status and JSON body of a side request."""
        return 404, {"error": {"message": f"mock: no route for {request.method} {request.path}"}}

    def side_reply(self, request: Request) -> Reply | None:
        """A reply streamed, as a turn is, to a side request (not logged in ``served``: e.g. a title
        the client asks for on the side); ``None``: ``side`` answers it."""
        return None

    # -- the log
    def bodies(self) -> list[Any]:
        """The bodies of the model requests, in order."""
        return [s.request.body for s in self.served]

    def replies(self) -> list[Reply]:
        """The replies served, in order."""
        return [s.turn for s in self.served if isinstance(s.turn, Reply)]

    def served_usage(self) -> Usage:
        """The sum of every reply's usage."""
        return sum((r.usage for r in self.replies()), Usage())

    # -- the server
    def __enter__(self) -> Self:
        api = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:  # quiet
                pass

            def _handle(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length) if length else b""
                if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
                    raw = _read_chunked(self.rfile)
                try:
                    body: Any = json.loads(raw) if raw else None
                except ValueError:
                    body = raw.decode("utf-8", "replace")
                request = Request(
                    self.command, self.path, {k.lower(): v for k, v in self.headers.items()}, body
                )
                with api._lock:
                    api.requests.append(request)
                if not api.is_turn(request):
                    reply = api.side_reply(request)
                    if reply is None:
                        self._json(*api.side(request))
                        return
                    turn: Turn = reply
                else:
                    turn = api.script(request)
                    with api._lock:
                        api.served.append(Served(request, turn))
                if isinstance(turn, Failure):
                    data = turn.body if isinstance(turn.body, str) else json.dumps(turn.body)
                    self._send(turn.status, data.encode(), "application/json", turn.headers)
                    return
                self.send_response(200)
                self.send_header("Content-Type", api.content_type)
                self.send_header("Cache-Control", "no-cache")
                self.send_header("Transfer-Encoding", "chunked")
                self.end_headers()
                for chunk in api.stream(request, turn):
                    self.wfile.write(f"{len(chunk):x}\r\n".encode() + chunk + b"\r\n")
                    self.wfile.flush()
                self.wfile.write(b"0\r\n\r\n")
                self.wfile.flush()

            def _json(self, status: int, answer: Any) -> None:
                self._send(status, json.dumps(answer).encode(), "application/json", ())

            def _send(
                self, status: int, data: bytes, ctype: str, headers: tuple[tuple[str, str], ...]
            ) -> None:
                self.send_response(status)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(data)))
                for k, v in headers:
                    self.send_header(k, v)
                self.end_headers()
                self.wfile.write(data)

            do_GET = do_POST = do_PUT = do_DELETE = _handle

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()


def _read_chunked(rfile: Any) -> bytes:
    """A chunked request body."""
    out = b""
    while True:
        size = int(rfile.readline().strip().split(b";")[0], 16)
        if size == 0:
            rfile.readline()
            return out
        out += rfile.read(size)
        rfile.readline()


def sse(event: str | None, data: Any) -> bytes:
    """One server-sent event (``event:`` line omitted when ``None``)."""
    head = f"event: {event}\n" if event else ""
    return f"{head}data: {json.dumps(data)}\n\n".encode()
