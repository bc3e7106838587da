"""The developer's loop (``Makefile``): each target names the command it runs, and ``make fast``
leaves out exactly the journeys, the real clients and the slow files, while ``.ci/run`` runs all; the test
extras (docs/design/architecture.md, "Tests and benches")."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from tests.conftest import SLOW_FILES, SOLO_FILES

ROOT = Path(__file__).resolve().parents[2]
TARGETS = ("venv", "lint", "fast", "journeys", "clients", "long", "test", "bench", "bench-quick")


def collected(*args: str) -> list[str]:
    """The node ids pytest collects with ``args``."""
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-o", "addopts=", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    # a parameter's id may hold a function's repr, whose address differs between processes
    return [re.sub(r" at 0x[0-9a-f]+", "", line) for line in done.stdout.splitlines() if "::" in line]


@pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")
def test_every_target_names_its_command() -> None:
    said = {
        t: subprocess.run(["make", "-n", t], cwd=ROOT, capture_output=True, text=True, check=True).stdout
        for t in TARGETS
    }
    assert "pytest -m" in said["fast"] and "not journey and not clients and not slow" in said["fast"]
    assert said["test"].strip() == ".venv/bin/python -m pytest"  # what .ci/run runs
    assert "--long" in said["long"] and "tests/journeys" in said["journeys"]
    assert "ruff check" in said["lint"] and "mypy" in said["lint"]


def test_the_fast_run_leaves_out_journeys_clients_and_slow_files_only() -> None:
    everything = collected()
    fast = collected("-m", "not journey and not clients and not slow")
    left_out = set(everything) - set(fast)
    assert fast and all(not re.match(r"tests/(journeys|clients)/", t) for t in fast)
    assert all(Path(t.split("::")[0]).name not in SLOW_FILES for t in fast)
    assert left_out == {
        t
        for t in everything
        if re.match(r"tests/(journeys|clients)/", t) or Path(t.split("::")[0]).name in SLOW_FILES
    }


def test_ci_runs_everything() -> None:
    ci = (ROOT / ".ci" / "run").read_text()
    assert ".venv/bin/python -m pytest\n" in ci and " -m " not in ci.split("pytest", 1)[1].split("\n")[0]


def extras() -> dict[str, list[str]]:
    """The optional dependencies of ``pyproject.toml``: extra -> its distributions' names."""
    table = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    return {
        extra: [re.split(r"[<>=!~\[ ;]", req, maxsplit=1)[0] for req in reqs] for extra, reqs in table.items()
    }


def installed_extras(text: str) -> set[str]:
    """The extras a ``pip install -e '.[a,b]'`` in ``text`` installs (every such command must agree)."""
    found = {frozenset(m.split(",")) for m in re.findall(r"pip install -q -e '\.\[([\w,-]+)\]'", text)}
    assert len(found) == 1, found
    return set(next(iter(found)))


@pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")
def test_the_test_command_ci_and_make_venv_install_every_extra() -> None:
    assert {"test", "spark", "browser"} <= set(extras())
    readme = (ROOT / "README.md").read_text()
    said = subprocess.run(["make", "-n", "venv"], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    for text in (readme, (ROOT / ".ci" / "run").read_text(), said):
        assert installed_extras(text) == set(extras())


EXTRA_MODULES = {"pyspark": "pyspark", "selenium": "selenium", "pillow": "PIL"}
"""The import name of each distribution of the extras beyond ``test``."""


def test_every_test_collects_with_the_test_extra_alone() -> None:
    """A venv with ``.[test]`` only runs ``make fast``: Spark's and the browser's tests import their
    extras when they run, not when pytest collects them (and ``.ci/run``, with every extra, runs them)."""
    beyond = {dist for extra, dists in extras().items() if extra != "test" for dist in dists}
    assert beyond == set(EXTRA_MODULES)
    code = (
        f"import sys; sys.modules.update(dict.fromkeys({sorted(EXTRA_MODULES.values())!r})); import pytest; "
        "sys.exit(pytest.main(['--collect-only', '-q', '-o', 'addopts=', '-p', 'no:cacheprovider']))"
    )
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    assert " tests collected in " in done.stdout


def test_tests_that_cannot_share_the_machine_are_solo_and_the_rest_are_not() -> None:
    """The parallel run (docs/design/architecture.md, "Tests and benches"): each real-terminal test and
    each test of a ``SOLO_FILES`` file runs alone; a unit test shares the machine."""
    solo = collected("-m", "solo")
    files = {t.split("::")[0].removeprefix("tests/") for t in solo}
    assert files >= SOLO_FILES
    assert {"journeys/test_tui.py", "journeys/test_tui_replay.py", "journeys/test_worktrees.py"} <= files
    terminal_files = {
        p.relative_to(ROOT / "tests").as_posix()
        for p in (ROOT / "tests").rglob("test_*.py")
        if p.name != Path(__file__).name and "terminals: list[Terminal]" in p.read_text()
    }
    assert terminal_files <= files
    assert not [t for t in solo if t.startswith("tests/unit/")]
