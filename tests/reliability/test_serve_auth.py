"""``ralph-tui --serve`` against the other users of the machine: a real server process serving a home
with a running loop, a plain websocket client (a socket and RFC 6455 by hand, no Origin: what any
local user can write) with and without the serve's token, and a second real user (uid 65534 in a
forked child) who may neither read the sessions nor pause the loop."""

from __future__ import annotations

import base64
import json
import os
import re
import signal
import socket
import struct
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest

from tests.journeys.conftest import clean_env, script
from tests.second_user import NOBODY, become_nobody

SAMPLES = Path(__file__).resolve().parents[2] / "sample_sessions"
SESSION = "tdd-success"
SEEN = SESSION.encode()
"""What the app shows of the home: the session's id, in its sessions table."""


class Socket:
    """A plain websocket client on one TCP connection to the server."""

    def __init__(self, port: int, path: str, headers: tuple[str, ...] = ()) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=10)
        key = base64.b64encode(os.urandom(16)).decode()
        lines = [
            f"GET {path} HTTP/1.1",
            f"Host: 127.0.0.1:{port}",
            "Upgrade: websocket",
            "Connection: Upgrade",
            f"Sec-WebSocket-Key: {key}",
            "Sec-WebSocket-Version: 13",
            *headers,
        ]
        self.sock.sendall(("\r\n".join(lines) + "\r\n\r\n").encode())
        data = b""
        while b"\r\n\r\n" not in data and (chunk := self.sock.recv(65536)):
            data += chunk
        head, _, self.rest = data.partition(b"\r\n\r\n")
        self.head = head.decode("latin-1")
        self.status = int(self.head.split()[1])

    def body(self) -> bytes:
        """A refused upgrade's answer (its ``Content-Length`` bytes)."""
        found = re.search(r"(?im)^content-length:\s*(\d+)", self.head)
        length = int(found.group(1)) if found else 0
        while len(self.rest) < length and (chunk := self.sock.recv(65536)):
            self.rest += chunk
        return self.rest[:length]

    def send(self, message: list[Any]) -> None:
        """One text frame (masked, as a client's must be) holding ``message`` as JSON."""
        payload = json.dumps(message).encode()
        mask = os.urandom(4)
        size = len(payload)
        header = (
            bytes([0x81, 0x80 | size]) if size < 126 else bytes([0x81, 0x80 | 126]) + struct.pack("!H", size)
        )
        self.sock.sendall(header + mask + bytes(b ^ mask[i % 4] for i, b in enumerate(payload)))

    def read(self, seconds: float, until: bytes = b"") -> bytes:
        """The payloads of the frames received within ``seconds`` (or until one holds ``until``)."""
        got, data = b"", self.rest
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline and not (until and until in got):
            while len(data) >= 2:
                size, start = data[1] & 0x7F, 2
                if size == 126:
                    size, start = struct.unpack("!H", data[2:4])[0] if len(data) >= 4 else -1, 4
                elif size == 127:
                    size, start = struct.unpack("!Q", data[2:10])[0] if len(data) >= 10 else -1, 10
                if size < 0 or len(data) < start + size:
                    break
                got += data[start : start + size]
                data = data[start + size :]
            self.sock.settimeout(max(0.05, deadline - time.monotonic()))
            try:
                chunk = self.sock.recv(65536)
            except TimeoutError:
                break
            if not chunk:
                break
            data += chunk
        self.rest = data
        return got

    def close(self) -> None:
        self.sock.close()


def http_get(port: int, path: str, headers: tuple[str, ...] = ()) -> tuple[int, str, bytes]:
    """A plain HTTP GET: (status, head, body)."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        lines = [f"GET {path} HTTP/1.1", f"Host: 127.0.0.1:{port}", "Connection: close", *headers]
        sock.sendall(("\r\n".join(lines) + "\r\n\r\n").encode())
        data = b""
        while chunk := sock.recv(65536):
            data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    return int(head.split()[1]), head.decode("latin-1"), body


@dataclass
class Served:
    """A running ``ralph-tui --serve --home HOME``: its port, the token it printed, the journal of
    the running loop it shows."""

    port: int
    token: str
    journal: Path
    server: subprocess.Popen[str]


@pytest.fixture
def served(tmp_path: Path) -> Iterator[Served]:
    home = tmp_path / "home"
    (home / "journals").mkdir(parents=True, mode=0o700)
    home.chmod(0o700)
    journal = home / "journals" / f"{SESSION}.jsonl"
    started = (SAMPLES / f"{SESSION}.jsonl").read_text().splitlines(keepends=True)[:3]
    journal.write_text("".join(started))  # started, its first iteration under way: a running loop
    journal.chmod(0o600)
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    server = subprocess.Popen(
        [script("ralph-tui"), "--serve", "--port", str(port), "--home", str(home)],
        cwd=tmp_path,
        env=clean_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        assert server.stdout is not None
        said = server.stdout.readline()
        assert said.startswith(f"ralph-tui: serving on http://127.0.0.1:{port}"), said
        address = said.removeprefix("ralph-tui: serving on ").split(";")[0].split(" ")[0]
        token = parse_qs(urlsplit(address).query).get("token", [""])[0]
        yield Served(port, token, journal, server)
    finally:
        server.send_signal(signal.SIGTERM)
        try:
            server.wait(timeout=15)
        except subprocess.TimeoutExpired:
            os.killpg(server.pid, signal.SIGKILL)
        server.communicate()


REFUSED = (
    b"ralph-tui: no token or a wrong one: "
    b"open the address ralph-tui --serve printed (it ends in ?token=...)\n"
)


def test_without_the_token_neither_page_nor_app_is_served(served: Served) -> None:
    """Every request without the token, or with a wrong one, in its URL or its cookie, gets 403 and
    the one line, websocket upgrades (no Origin, as a script sends none) included: no app starts,
    nothing of the home is sent."""
    port, cookie = served.port, f"Cookie: ralph-tui-{served.port}"
    for path, headers in [
        ("/", ()),
        ("/static/js/textual.js", ()),
        ("/download/x", ()),
        ("/?token=", ()),
        (f"/?token={served.token[:-1]}", ()),
        (f"/?token={served.token}x", ()),
        ("/?token=%C3%A9", ()),
        ("/", (f"{cookie}=wrong",)),
        ("/", (f"Cookie: ralph-tui-1={served.token}",)),  # another port's cookie name
    ]:
        status, _, body = http_get(port, path, headers)
        assert (status, body) == (403, REFUSED), (path, headers, status, body[:300])
    for path, headers in [
        ("/ws?width=80&height=24", ()),
        ("/ws?width=80&height=24&token=guess", ()),
        ("/ws?width=80&height=24", (f"{cookie}=guess",)),
    ]:
        ws = Socket(port, path, headers)
        try:
            assert ws.status == 403, (path, ws.head)
            assert ws.body() == REFUSED
        finally:
            ws.close()
    time.sleep(1)
    assert served.journal.read_bytes().count(b"\n") == 3
    assert re.fullmatch(r"[\w-]{32}", served.token), served.token  # 24 random bytes


def test_with_the_token_the_page_its_assets_and_its_app_work(served: Served) -> None:
    """The printed address works: its page sets the cookie (this port's, HttpOnly, SameSite=Strict)
    that the page's assets and websocket then carry; a websocket with the token in its URL works as
    well, shows the home's session, and ``P`` pauses its loop (what the refused user may not do)."""
    port = served.port
    status, head, page = http_get(port, f"/?token={served.token}")
    assert status == 200 and b"data-session-websocket-url" in page
    cookie = re.search(r"(?im)^set-cookie:\s*(.*)$", head)
    assert cookie, head
    assert cookie.group(1).strip() == (
        f"ralph-tui-{port}={served.token}; HttpOnly; Path=/; SameSite=Strict"
    ), cookie.group(1)
    assert http_get(port, "/static/js/textual.js", (f"Cookie: ralph-tui-{port}={served.token}",))[0] == 200

    ws = Socket(port, "/ws?width=100&height=30", (f"Cookie: ralph-tui-{port}={served.token}",))
    try:
        assert ws.status == 101, ws.head
        assert SEEN in ws.read(30, until=SEEN)
    finally:
        ws.close()
    ws = Socket(port, f"/ws?token={served.token}&width=100&height=30")
    try:
        assert ws.status == 101, ws.head
        assert SEEN in ws.read(30, until=SEEN)
        ws.read(1)  # the table drawn, its first row highlighted
        ws.send(["stdin", "P"])
        deadline = time.monotonic() + 20
        while b'"pause"' not in served.journal.read_bytes():
            ws.read(0.2)
            assert time.monotonic() < deadline, served.journal.read_text()
    finally:
        ws.close()


def as_nobody(port: int, token: str) -> dict[str, Any]:
    """In a forked child as uid and gid 65534: what another user gets from the port (a page, an
    app through a plain websocket, to which ``P`` is sent, and a guessed cookie), and whether the
    token shows in any process's command line."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: never returns into pytest
        code = 0
        try:
            os.close(read)
            become_nobody()
            out: dict[str, Any] = {"uid": os.getuid()}
            status, _, body = http_get(port, "/")
            out["page"] = [status, body.decode("latin-1")]
            ws = Socket(port, "/ws?width=100&height=30")
            got = ws.body() if ws.status != 101 else b""
            if ws.status == 101:  # let in: read what it shows, and press P on the first session
                got += ws.read(20, until=SEEN)
                ws.send(["stdin", "P"])
                got += ws.read(5)
            ws.close()
            out["app"] = [ws.status, got.decode("latin-1")]
            guessed = Socket(port, "/ws?width=100&height=30", (f"Cookie: ralph-tui-{port}=AAAA",))
            out["guessed"] = guessed.status
            guessed.close()
            shown = []
            for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
                try:
                    shown.append(token in cmdline.read_bytes().decode(errors="replace"))
                except OSError:
                    continue
            out["token_in_a_command_line"] = any(shown) and bool(token)
            os.write(write, json.dumps(out).encode())
        except BaseException as exc:
            os.write(write, json.dumps({"error": repr(exc)}).encode())
            code = 1
        finally:
            os._exit(code)
    os.close(write)
    data = b""
    while chunk := os.read(read, 1 << 20):
        data += chunk
    os.close(read)
    os.waitpid(pid, 0)
    result: dict[str, Any] = json.loads(data)
    return result


@pytest.mark.skipif(os.geteuid() != 0, reason="a second real user needs root (setuid)")
def test_another_local_user_can_neither_read_nor_steer(served: Served) -> None:
    """Another user of the machine reaches the loopback port: the page and the websocket (no Origin)
    are refused with the one line, a guessed cookie too, nothing of the owner's home comes back, ``P``
    never reaches the app (the loop is not paused), and the token is in no process's command line
    (the tabs' apps are not given it)."""
    owner = Socket(served.port, f"/ws?token={served.token}&width=100&height=30")  # an app running
    try:
        assert owner.status == 101 and SEEN in owner.read(30, until=SEEN)
        before = served.journal.read_bytes()
        seen = as_nobody(served.port, served.token)
        assert seen.get("uid") == NOBODY, seen
        assert seen["page"] == [403, REFUSED.decode()], seen["page"]
        status, got = seen["app"]
        assert SESSION not in got, f"another user read the owner's sessions: status {status}"
        assert status == 403 and got == REFUSED.decode(), (status, got[:300])
        assert seen["guessed"] == 403
        assert not seen["token_in_a_command_line"]
        time.sleep(2)
        assert served.journal.read_bytes() == before, "another user steered the owner's loop"
    finally:
        owner.close()
