"""``ralph-tui --serve``'s pieces: what each browser tab runs, the address said."""

from __future__ import annotations

import shlex
import sys

import pytest

from tui.serve import app_argv, app_command, is_local, url


@pytest.mark.parametrize(
    "argv",
    [
        ["--serve", "--replay", "sample_sessions/", "--speed", "0"],
        ["--replay", "sample_sessions/", "--serve", "--port", "9000", "--speed", "0"],
        ["--host=0.0.0.0", "--replay", "sample_sessions/", "--port=9000", "--speed", "0", "--serve"],
        ["--ser", "--replay", "sample_sessions/", "--po", "9000", "--speed", "0"],
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
