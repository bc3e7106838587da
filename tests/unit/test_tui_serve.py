"""``ralph-tui --serve``'s pieces: what each browser tab runs, the address said."""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys

import pytest

from tui.serve import app_argv, app_command, is_local, url


@pytest.mark.parametrize(
    "argv",
    [
        ["--serve", "--replay", "sample_sessions/", "--speed", "0"],
        ["--replay", "sample_sessions/", "--serve", "--port", "9000", "--speed", "0"],
        ["--host=0.0.0.0", "--replay", "sample_sessions/", "--port=9000", "--speed", "0", "--serve"],
    ],
)
def test_each_tab_runs_the_command_given_less_the_serve_options(argv: list[str]) -> None:
    assert app_argv(argv) == ["--replay", "sample_sessions/", "--speed", "0"]


def test_homes_and_other_options_stay_in_their_order() -> None:
    argv = ["a", "--serve", "b", "--home", "h", "--bell", "--osc-notify", "9"]
    assert app_argv(argv) == ["a", "b", "--home", "h", "--bell", "--osc-notify", "9"]


def test_the_tab_command_is_this_python_running_tui_main_never_a_local_tui_package() -> None:
    command = shlex.split(app_command(["--serve", "--home", "my home"]))
    assert command == [sys.executable, "-P", "-m", "tui.main", "--home", "my home"]


@pytest.mark.parametrize(
    ("host", "port", "expected", "local"),
    [
        ("127.0.0.1", 8000, "http://127.0.0.1:8000", True),
        ("localhost", 8001, "http://localhost:8001", True),
        ("::1", 8002, "http://[::1]:8002", True),
        ("0.0.0.0", 8003, "http://127.0.0.1:8003", False),
        ("::", 8004, "http://127.0.0.1:8004", False),
        ("192.0.2.7", 8005, "http://192.0.2.7:8005", False),
    ],
)
def test_the_address_said(host: str, port: int, expected: str, local: bool) -> None:
    assert url(host, port) == expected
    assert is_local(host) is local


def test_the_browser_journeys_install_chromium_as_root_or_say_what_to_install(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Run as root with apt-get (CI): Debian's packages are installed when missing. Anyone else: the
    test fails with one line naming them (never a silent skip)."""
    from tests.journeys import browser

    installed = ("/usr/bin/chromium", "/usr/bin/chromedriver")
    found: list[tuple[str | None, str | None]] = [(None, None), installed]
    ran: list[list[str]] = []
    monkeypatch.setattr(browser, "_programs", lambda: found.pop(0))
    monkeypatch.setattr(shutil, "which", lambda name: f"/usr/bin/{name}")
    monkeypatch.setattr(os, "geteuid", lambda: 0)

    def run(step: list[str], **_: object) -> subprocess.CompletedProcess[str]:
        ran.append(step)
        return subprocess.CompletedProcess(step, 0, "", "")

    monkeypatch.setattr(subprocess, "run", run)
    assert browser.chromium() == installed
    install = ["apt-get", "install", "-y", "-q", "chromium", "chromium-driver"]
    assert ran == [["apt-get", "update", "-q"], install]

    monkeypatch.setattr(browser, "_programs", lambda: (None, None))
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    with pytest.raises(pytest.fail.Exception, match=r"sudo apt-get install chromium chromium-driver\)$"):
        browser.chromium()
