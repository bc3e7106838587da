"""House rules between ``ledger`` and the TUI: ledger never imports Textual, and ``tui/`` uses only
ledger's public API (``ledger``, ``ledger.monitor``, ``ledger.monitor.replay``); docs/design/architecture.md,
"The public face"."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PUBLIC = {"ledger", "ledger.monitor", "ledger.monitor.replay"}
BIN = Path(sys.executable).parent


def ledger_modules() -> list[str]:
    """Every module of the ledger package."""
    names = []
    for path in sorted((ROOT / "ledger").rglob("*.py")):
        parts = path.relative_to(ROOT).with_suffix("").parts
        names.append(".".join(parts[:-1] if parts[-1] == "__init__" else parts))
    return names


MCP_SDK = {"ledger.drivers.mcp.server"}
"""The modules that import the MCP SDK, whose HTTP transport imports uvicorn, whose reloader imports
watchfiles when it is installed: a library's import, not the TUI's (Textual stays out of them too)."""


def imported(modules: list[str], roots: tuple[str, ...]) -> list[str]:
    """The modules under ``roots`` loaded once every one of ``modules`` is imported, in a fresh process."""
    code = (
        "import importlib, json, sys\n"
        f"for name in {modules!r}:\n"
        "    importlib.import_module(name)\n"
        f"print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] in {roots!r})))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT)
    found: list[str] = json.loads(out.stdout)
    return found


def test_importing_every_ledger_module_does_not_import_textual() -> None:
    modules = ledger_modules()
    assert {"ledger", "ledger.monitor", "ledger.monitor.replay", "ledger.cli"} <= set(modules)
    assert set(modules) >= MCP_SDK
    assert imported(modules, ("textual",)) == []
    assert imported([m for m in modules if m not in MCP_SDK], ("textual", "watchfiles")) == []


def ledger_imports(path: Path) -> list[tuple[int, str]]:
    """(line, what) for every import from ledger in a file: a module, or ``ledger:NAME`` for
    ``from ledger import NAME``."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            if node.module == "ledger":
                found += [(node.lineno, f"ledger:{a.name}") for a in node.names]
            else:
                found.append((node.lineno, node.module))
    return [(line, name) for line, name in found if name.split(".")[0].split(":")[0] == "ledger"]


def allowed(name: str) -> bool:
    """``ledger``, ``ledger.monitor``, ``ledger.monitor.replay``, or a name ledger/__init__.py exports."""
    import ledger

    if name.startswith("ledger:"):
        return name.removeprefix("ledger:") in ledger.__all__
    return name in PUBLIC


def test_tui_uses_only_the_public_ledger_api() -> None:
    files = sorted((ROOT / "tui").rglob("*.py"))
    assert files
    bad = [f"{p.name}:{line}: {name}" for p in files for line, name in ledger_imports(p) if not allowed(name)]
    assert not bad, "tui/ may import only ledger, ledger.monitor and ledger.monitor.replay:\n" + "\n".join(
        bad
    )
    used = {name for p in files for _, name in ledger_imports(p)}
    assert {"ledger.monitor", "ledger.monitor.replay"} <= used


def test_the_import_check_catches_private_imports(tmp_path: Path) -> None:
    sample = tmp_path / "x.py"
    sample.write_text(
        "from ledger.storage.database import Ledger\nimport ledger.storage.journal\n"
        "from ledger import Home, store\n"
        "from ledger.monitor import Monitor\nimport ledger\n"
    )
    names = [name for _, name in ledger_imports(sample)]
    assert [n for n in names if not allowed(n)] == [
        "ledger.storage.database",
        "ledger.storage.journal",
        "ledger:store",
    ]


def test_tui_ruff_clean() -> None:
    proc = subprocess.run([str(BIN / "ruff"), "check", "tui"], cwd=ROOT, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_every_public_tui_definition_has_a_docstring() -> None:
    from tests.architecture.test_docs import undocumented

    files = sorted((ROOT / "tui").rglob("*.py"))
    missing = [item for path in files for item in undocumented(path.read_text(), path.name)]
    assert not missing, "add a short docstring:\n" + "\n".join(missing)
