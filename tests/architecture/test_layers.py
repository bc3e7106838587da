"""The layer contracts of ``ledger/`` and ``tui/`` (``[tool.importlinter]`` in ``pyproject.toml``), checked
with import-linter. What each layer holds and why the contracts are what they are:
docs/design/architecture.md, "Layers". Imports inside functions and under ``TYPE_CHECKING`` count."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
LINT_IMPORTS = Path(sys.executable).parent / "lint-imports"


def config() -> dict[str, Any]:
    """The ``[tool.importlinter]`` table of the project's ``pyproject.toml``."""
    table: dict[str, Any] = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]
    return table


def contract(contract_id: str) -> dict[str, Any]:
    """The contract of that ``id``."""
    found: list[dict[str, Any]] = [c for c in config()["contracts"] if c["id"] == contract_id]
    assert len(found) == 1, contract_id
    return found[0]


def layer_modules() -> list[list[str]]:
    """The modules of each layer of the ``layers`` contract, top first."""
    return [re.split(r"\s*[|:]\s*", layer.strip()) for layer in contract("layers")["layers"]]


def ledger_parts(root: Path = ROOT) -> set[str]:
    """``ledger.X`` for every subpackage and module right under ``ledger/`` (the face left out)."""
    return {
        f"ledger.{p.stem}"
        for p in (root / "ledger").iterdir()
        if (p.is_dir() and (p / "__init__.py").exists()) or (p.suffix == ".py" and p.stem != "__init__")
    }


def lint_imports(cwd: Path, *config_file: str) -> subprocess.CompletedProcess[str]:
    """``lint-imports`` run in ``cwd`` on the packages found there first, without a cache."""
    env = {**os.environ, "PYTHONPATH": str(cwd), "COLUMNS": "400", "NO_COLOR": "1"}
    return subprocess.run(
        [str(LINT_IMPORTS), "--no-cache", "--no-logo", *config_file],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def broken(output: str) -> set[str]:
    """The ids of the contracts ``lint-imports`` reported broken."""
    names = {c["name"]: c["id"] for c in config()["contracts"]}
    return {names[line.removesuffix(" BROKEN")] for line in output.splitlines() if line.endswith(" BROKEN")}


def test_the_layer_contracts_hold() -> None:
    proc = lint_imports(ROOT)
    assert "Contracts: " in proc.stdout, proc.stdout + proc.stderr
    assert proc.returncode == 0, proc.stdout[proc.stdout.find("Broken contracts") :]


def test_every_folder_of_python_is_a_package() -> None:
    """import-linter sees only regular packages: a folder of modules without ``__init__.py`` (a namespace
    package) would escape every contract."""
    folders = {p.parent for package in ("ledger", "tui") for p in (ROOT / package).rglob("*.py")}
    assert sorted(str(f.relative_to(ROOT)) for f in folders if not (f / "__init__.py").exists()) == []


def test_every_part_of_ledger_is_in_one_layer() -> None:
    """A new folder or module right under ``ledger/`` must be placed in a layer (and the tui rule)."""
    listed = [m for layer in layer_modules() for m in layer]
    assert sorted(listed) == sorted({*ledger_parts(), "tui"})
    assert set(layer_modules()[0]) == {"ledger.cli", "tui"}


def test_tui_is_kept_from_every_part_of_ledger_but_the_monitor() -> None:
    tui = contract("tui-two-doors")
    assert tui["source_modules"] == ["tui"] and set(tui["forbidden_modules"]) == ledger_parts() - {
        "ledger.monitor"
    }


def test_the_public_face_names_nothing_of_the_top_layer() -> None:
    """The face (``ledger/__init__.py``) sits on top beside ``ledger.cli`` and ``tui``: the modules it
    maps names to lazily (unseen by import-linter) lie in the layers below."""
    import ledger

    top = layer_modules()[0]
    targets = set(vars(ledger)["_EXPORTS"].values())
    assert targets and all(t.startswith("ledger.") for t in targets)
    assert [t for t in targets if any(t == m or t.startswith(m + ".") for m in top)] == []


FAKE = {
    "ledger/__init__.py": "from ledger.core import interrupts\n",
    "ledger/events.py": "",
    "ledger/core/__init__.py": "",
    "ledger/core/interrupts.py": "",
    "ledger/core/home.py": "",
    "ledger/storage/__init__.py": "",
    "ledger/storage/journal.py": "from ledger import events\nfrom ledger.core import home\n",
    "ledger/loop/__init__.py": "",
    "ledger/loop/engine.py": "from ledger.storage import journal\n",
    "ledger/loop/config.py": "",
    "ledger/drivers/__init__.py": "",
    "ledger/drivers/run.py": "from ledger.loop import engine\nfrom ledger.notify import send\n",
    "ledger/drivers/formats.py": "",
    "ledger/monitor/__init__.py": "from ledger.storage import journal\n",
    "ledger/monitor/replay.py": "",
    "ledger/notify/__init__.py": "",
    "ledger/notify/send.py": "def f():\n    from ledger.loop import config\n",
    "ledger/notify/compose.py": "",
    "ledger/cli/__init__.py": "from ledger.drivers import run\nfrom ledger.monitor import replay\n",
    "tui/__init__.py": "",
    "tui/app.py": "from ledger import Home\nfrom ledger.monitor import replay\n",
}
"""A small tree of the project's package names that keeps every contract, importing down each layer."""

VIOLATIONS = {
    "storage imports the loop in a function": (
        "ledger/storage/journal.py",
        "def f():\n    from ledger.loop import engine\n",
        {"layers", "no-loop-below"},
    ),
    "the loop imports notify": ("ledger/loop/engine.py", "from ledger.notify import send\n", {"layers"}),
    "core imports storage under TYPE_CHECKING": (
        "ledger/core/home.py",
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from ledger.storage.journal import x\n",
        {"layers"},
    ),
    "events imports core": ("ledger/events.py", "import ledger.core.home\n", {"layers"}),
    "the cli imports tui": ("ledger/cli/__init__.py", "import tui.app\n", {"layers"}),
    "the monitor imports the loop": ("ledger/monitor/replay.py", "import ledger.loop\n", {"no-loop-below"}),
    "the monitor imports a driver": (
        "ledger/monitor/replay.py",
        "from ledger.drivers import formats\n",
        {"monitor-drivers"},
    ),
    "notify imports the monitor": ("ledger/notify/compose.py", "import ledger.monitor\n", {"monitor-notify"}),
    "notify imports a driver": (
        "ledger/notify/send.py",
        "from ledger.drivers import run\n",
        {"notify-below-drivers"},
    ),
    "tui imports storage": ("tui/app.py", "from ledger.storage.journal import Journal\n", {"tui-two-doors"}),
    "storage imports the face": ("ledger/storage/journal.py", "from ledger import Home\n", {"face-on-top"}),
}


def fake_project(tmp_path: Path, changes: dict[str, str]) -> Path:
    """``FAKE`` with ``changes`` in ``tmp_path``, beside a copy of the project's ``[tool.importlinter]``."""
    for name, text in {**FAKE, **changes}.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    pyproject = (ROOT / "pyproject.toml").read_text()
    start = pyproject.index("[tool.importlinter]\n")
    end = re.search(r"^\[(?!\[?tool\.importlinter)", pyproject[start + 1 :], re.MULTILINE)
    (tmp_path / "pyproject.toml").write_text(pyproject[start : start + 1 + end.start() if end else None])
    return tmp_path


def test_the_fake_tree_keeps_every_contract(tmp_path: Path) -> None:
    proc = lint_imports(fake_project(tmp_path, {}))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert f"Contracts: {len(config()['contracts'])} kept, 0 broken." in proc.stdout


@pytest.mark.parametrize("case", sorted(VIOLATIONS))
def test_a_broken_contract_fails_the_check(tmp_path: Path, case: str) -> None:
    path, text, expected = VIOLATIONS[case]
    proc = lint_imports(fake_project(tmp_path, {path: FAKE[path] + text}))
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert broken(proc.stdout) == expected, proc.stdout
    importer = path.removesuffix(".py").removesuffix("/__init__").replace("/", ".")
    assert re.search(rf"^- {re.escape(importer)} -> ", proc.stdout, re.MULTILINE) or (
        f"{importer} -> " in proc.stdout
    ), proc.stdout


def test_the_architecture_doc_has_a_line_for_every_folder() -> None:
    """docs/design/architecture.md, "The tree": one line per folder of ``ledger/`` and ``tui/``."""
    text = (ROOT / "docs" / "design" / "architecture.md").read_text()
    folders = {
        p.parent.relative_to(ROOT).as_posix()
        for package in ("ledger", "tui")
        for p in (ROOT / package).rglob("*")
        if p.is_file() and "__pycache__" not in p.parts
    }
    assert {"ledger", "tui/screens", "ledger/storage/sql/views"} <= folders
    assert sorted(f for f in folders if f"| `{f}/` |" not in text) == []
