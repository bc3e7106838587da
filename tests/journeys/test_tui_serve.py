"""``ralph-tui --serve``: the app as a web page, opened in a real headless Chromium; the server in a real
terminal (a tmux pane) for its one line and Ctrl-C."""

from __future__ import annotations

import base64
import http.client
import json
import re
import shutil
import signal
import socket
import subprocess
import time
import urllib.request
from collections import Counter
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from tests.journeys.browser import headless_browser, terminal_rows
from tests.journeys.conftest import Project, Terminal, clean_env, script

SAMPLES = Path(__file__).resolve().parents[2] / "sample_sessions"
SESSIONS = sorted(
    json.loads(path.read_text().splitlines()[0])["session_id"] for path in SAMPLES.glob("*.jsonl")
)
"""The sample sessions' ids, from the first line of each journal."""


def free_port() -> int:
    """A port nothing listens on now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def listening(port: int) -> list[str]:
    """The IPv4 addresses a socket listens on at ``port`` (``/proc/net/tcp``), as dotted quads."""
    found = []
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        local, state = line.split()[1], line.split()[3]
        address, hex_port = local.split(":")
        if state == "0A" and int(hex_port, 16) == port:
            found.append(".".join(str(b) for b in reversed(bytes.fromhex(address))))
    return found


def serve(terminals: list[Terminal], project: Project, *args: str) -> Terminal:
    """``ralph-tui --serve ARGS`` typed in the project; waits for its one line."""
    term = Terminal([script("ralph-tui"), "--serve", *args], cwd=project.dir, env=clean_env(), size=(200, 10))
    terminals.append(term)
    term.wait_for("Ctrl-C stops", timeout=15)
    return term


def served_address(said: str) -> str:
    """The address (with its token) in what ``ralph-tui --serve`` said."""
    found = re.search(r"serving on (http://\S+/\?token=[\w-]{32})(?![\w-])", said)
    assert found, said
    return found.group(1)


def test_the_served_page_shows_the_sample_sessions_in_chromium_and_ctrl_c_stops_it(
    project: Project, terminals: list[Terminal], tmp_path: Path
) -> None:
    """The README's replay as a web page: one line with the URL, bound to 127.0.0.1 only; in a headless
    Chromium the sessions table lists every sample session, replayed to the end as ``--speed 0`` (the
    tab's app got the user's arguments, less the serve options, and runs in the folder of the relative
    path, yet never imports a ``tui`` package of that folder); the screenshot shows it; the page asks
    nothing of another host; Ctrl-C exits 130 within seconds with the tab still open, whose page then
    says its session ended."""
    shutil.copytree(SAMPLES, project.dir / "sample_sessions")
    project.write("tui/__init__.py", 'raise SystemExit("the project\'s own tui package")\n')  # never run
    port = free_port()
    term = serve(terminals, project, "--port", str(port), "--replay", "sample_sessions/", "--speed", "0")
    url = f"http://127.0.0.1:{port}"
    address = served_address(term.screen())
    assert address.startswith(f"{url}/?token=")
    assert f"ralph-tui: serving on {address}; Ctrl-C stops" in term.screen()
    assert listening(port) == ["127.0.0.1"]

    page = urllib.request.urlopen(address, timeout=10).read().decode()
    addresses = re.findall(r"""(?:src|href|url)\s*[=(]\s*["']?(https?://[^"')\s]+)""", page)
    assert addresses and all(a.startswith(url + "/") for a in addresses), addresses
    assert f'data-session-websocket-url="ws://127.0.0.1:{port}/ws"' in page

    shot = tmp_path / "served.png"
    with headless_browser(1280, 800) as chrome:
        chrome.get(address)
        deadline = time.monotonic() + 20
        rows: list[str] = []
        while time.monotonic() < deadline:
            rows = terminal_rows(chrome)
            text = "\n".join(rows)
            if all(sid[:20] in text for sid in SESSIONS) and "replayed" in text and "q Quit" in rows[-1]:
                break
            time.sleep(0.2)
        text = "\n".join(rows)
        missing = [sid for sid in SESSIONS if sid[:20] not in text]
        assert not missing, f"the page never listed {missing}; it shows:\n{text}"
        assert f"{len(SESSIONS)} sessions" in text and "replayed" in text, text
        assert re.search(r"✔ [1-9]\d* complete", text), text
        assert "q Quit" in rows[-1], rows[-1]  # the page has the keyboard: the footer shows the keys
        chrome.save_screenshot(str(shot))
        chrome.switch_to.active_element.send_keys("?")  # typed, not clicked first: the help screen
        deadline = time.monotonic() + 10
        while "ralph-tui · keys" not in "\n".join(terminal_rows(chrome)):
            assert time.monotonic() < deadline, "\n".join(terminal_rows(chrome))
            time.sleep(0.1)

        term.press("C-c")  # with the tab open: the page is told at once that its session ended
        started = time.monotonic()
        assert term.exit_code(timeout=10) == 130
        assert time.monotonic() - started < 5
        said = [line.removeprefix("^C") for line in term.screen().splitlines() if line.strip()]  # the echo
        assert said[-1] == "ralph-tui: stopped serving", said
        closed = "return document.body.classList.contains('-closed')"
        deadline = time.monotonic() + 5
        while not chrome.execute_script(closed):
            assert time.monotonic() < deadline, "the page never said its session ended"
            time.sleep(0.1)

    from PIL import Image  # the browser extra: imported here, so a run without it still collects

    with Image.open(shot) as image:
        assert image.size[0] == 1280 and image.size[1] >= 600
        colours = Counter(image.convert("RGB").get_flattened_data())
    background = colours.most_common(1)[0][1] / sum(colours.values())
    assert len(colours) > 20 and background < 0.9, (len(colours), background)


def test_a_port_in_use_is_one_line_and_exit_1(project: Project) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        proc = subprocess.run(
            [script("ralph-tui"), "--serve", "--port", str(port), "--home", str(project.home)],
            cwd=project.dir,
            env=clean_env(),
            capture_output=True,
            text=True,
            timeout=30,
        )
    assert proc.returncode == 1
    said = f"ralph-tui: cannot serve on 127.0.0.1:{port}: in use (choose another with --port N)\n"
    assert proc.stderr == said
    assert proc.stdout == ""


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["--serve", "--replay", "nowhere/"], "ralph-tui: nowhere: no such journal or directory\n"),
        (["--serve", "--port", "70000"], "--port: '70000': expected a port number from 1 to 65535"),
        (["--port", "9000", "--replay", "elsewhere/"], "ralph-tui: --host and --port go with --serve\n"),
        (["--host", "0.0.0.0"], "ralph-tui: --host and --port go with --serve\n"),
    ],
)
def test_bad_arguments_are_refused_before_serving(project: Project, args: list[str], said: str) -> None:
    proc = subprocess.run(
        [script("ralph-tui"), *args],
        cwd=project.dir,
        env=clean_env(),
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert proc.returncode == 2
    assert said in proc.stderr and "serving" not in proc.stdout + proc.stderr


def test_a_host_for_other_machines_is_asked_for_and_the_page_follows_the_address_used(
    project: Project, terminals: list[Terminal]
) -> None:
    """``--host 0.0.0.0`` listens on every interface, says so and that its token travels in plain HTTP;
    a page opened through another name talks back to that name (not to 0.0.0.0)."""
    port = free_port()
    term = serve(terminals, project, "--host", "0.0.0.0", "--port", str(port), "--home", str(project.home))
    address = served_address(term.screen())
    where = "(listening on 0.0.0.0: plain HTTP, the token can be overheard)"
    assert f"ralph-tui: serving on {address} {where}; Ctrl-C stops" in term.screen()
    assert address.startswith(f"http://127.0.0.1:{port}/?token=")
    assert listening(port) == ["0.0.0.0"]
    request = urllib.request.Request(address, headers={"Host": f"ledger.example:{port}"})
    page = urllib.request.urlopen(request, timeout=10).read().decode()
    assert f'data-session-websocket-url="ws://ledger.example:{port}/ws"' in page
    assert f"http://ledger.example:{port}/static/js/textual.js" in page
    term.press("C-c")
    assert term.exit_code() == 130


def test_another_sites_page_may_not_open_the_app(project: Project, terminals: list[Terminal]) -> None:
    """Any page open in the browser can open a websocket to 127.0.0.1; only the served page's own
    origin gets an app (another one is refused with 403 before any app starts), and served on this
    machine only, a request must name it (a rebound name gets 421, page and app alike)."""
    port = free_port()
    term = serve(terminals, project, "--port", str(port), "--home", str(project.home))
    query = urlsplit(served_address(term.screen())).query  # the token: what is tested here is the rest

    def upgrade(origin: str, host: str = f"127.0.0.1:{port}") -> int:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        headers = {
            "Host": host,
            "Connection": "Upgrade",
            "Upgrade": "websocket",
            "Sec-WebSocket-Version": "13",
            "Sec-WebSocket-Key": base64.b64encode(b"0123456789abcdef").decode(),
            "Origin": origin,
        }
        conn.request("GET", f"/ws?{query}&width=80&height=24", headers=headers)
        status = conn.getresponse().status
        conn.close()
        return status

    assert upgrade("https://evil.example") == 403
    assert upgrade(f"http://localhost:{port}") == 403  # another host name than the one asked
    assert upgrade(f"http://127.0.0.1:{port}") == 101
    # DNS rebinding: a site's name made to point at 127.0.0.1, its page then being "same origin"
    rebound = f"rebound.example:{port}"
    assert upgrade(f"http://{rebound}", host=rebound) == 421

    def page(host: str) -> int:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        conn.request("GET", f"/?{query}", headers={"Host": host})
        status = conn.getresponse().status
        conn.close()
        return status

    assert page(rebound) == 421
    assert page(f"localhost:{port}") == page(f"127.0.0.1:{port}") == page(f"[::1]:{port}") == 200
    term.press("C-c")
    assert term.exit_code() == 130


def test_stopped_by_sigterm_with_a_tab_open_its_app_quits_at_once(project: Project) -> None:
    """A service manager's SIGTERM reaches the server only (not the tabs' apps, as Ctrl-C in a terminal
    does): it still ends each open tab's app at once, and exits 143."""
    port = free_port()
    server = subprocess.Popen(
        [script("ralph-tui"), "--serve", "--port", str(port), "--replay", str(SAMPLES), "--speed", "0"],
        cwd=project.dir,
        env=clean_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        assert server.stdout is not None
        said = server.stdout.readline()
        assert said.startswith("ralph-tui: serving on")
        with headless_browser(1000, 600) as chrome:
            chrome.get(served_address(said))
            deadline = time.monotonic() + 20
            while "sessions" not in "\n".join(terminal_rows(chrome)):
                assert time.monotonic() < deadline, "the page never showed the sessions"
                time.sleep(0.2)
            started = time.monotonic()
            server.send_signal(signal.SIGTERM)
            assert server.wait(timeout=15) == 143
            assert time.monotonic() - started < 5, time.monotonic() - started  # it used to take 6.5 s
    finally:
        server.kill()
        server.communicate()


@pytest.mark.parametrize(
    ("host", "reason"),
    [
        ("192.0.2.1", "cannot assign requested address"),  # not an address of this machine
        ("nosuch.invalid", "Name or service not known"),
    ],
)
def test_an_address_it_cannot_listen_on_is_one_line_and_exit_1(
    project: Project, host: str, reason: str
) -> None:
    port = str(free_port())
    proc = subprocess.run(
        [script("ralph-tui"), "--serve", "--host", host, "--port", port, "--home", str(project.home)],
        cwd=project.dir,
        env=clean_env(),
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert proc.returncode == 1
    assert proc.stderr.startswith(f"ralph-tui: cannot serve on {host}:") and proc.stderr.count("\n") == 1
    assert reason in proc.stderr and proc.stdout == ""
