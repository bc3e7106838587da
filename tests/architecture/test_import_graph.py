"""No import cycles in ``ledger/`` or ``tui/``: the import graph of the source is a DAG (the layers and
their contracts: docs/design/architecture.md).

Every import counts, the ones inside functions too (a cycle that only closes at call time is a cycle
of design), ``from . import x`` and ``from pkg import submodule`` included, and the imports under
``if TYPE_CHECKING:``: they never run, but a typed reference back up (a screen naming its app's class)
is a dependency all the same; the part below takes what it needs as arguments or posts messages up.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("ledger", "tui")


def module_name(path: Path, root: Path) -> str:
    """``ledger/loop/engine.py`` -> ``ledger.loop.engine``; a package's ``__init__.py`` is the package."""
    parts = path.relative_to(root).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(node: ast.AST) -> Iterator[ast.Import | ast.ImportFrom]:
    """Every import statement under ``node`` at any depth (``if TYPE_CHECKING:`` bodies included)."""
    for child in ast.walk(node):
        if isinstance(child, ast.Import | ast.ImportFrom):
            yield child


def _base(name: str, path: Path, node: ast.ImportFrom) -> str:
    """The absolute module ``from <...> import`` names in ``name``'s file ``path``."""
    if node.level == 0:
        return node.module or ""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    for _ in range(node.level - 1):
        package = package.rpartition(".")[0]
    return f"{package}.{node.module}" if node.module else package


def import_graph(root: Path, packages: tuple[str, ...] = PACKAGES) -> dict[str, set[str]]:
    """Module -> the modules of ``packages`` it imports (at import time or inside a function)."""
    files = {module_name(p, root): p for pkg in packages for p in sorted((root / pkg).rglob("*.py"))}
    graph: dict[str, set[str]] = {}
    for name, path in files.items():
        edges: set[str] = set()
        for node in _imports(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            else:
                base = _base(name, path, node)
                targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in files else base for a in node.names]
            for target in targets:
                while target and target not in files:  # ``import a.b.c`` of a name: its module
                    target = target.rpartition(".")[0]
                if target and target != name:
                    edges.add(target)
        graph[name] = edges
    return graph


def find_cycle(graph: dict[str, set[str]]) -> list[str]:
    """One cycle of ``graph`` as ``[a, b, ..., a]``, or ``[]`` when it has none."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(node: str) -> list[str]:
        state[node] = 1
        path.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return [*path[path.index(nxt) :], nxt]
            if nxt not in state and (found := visit(nxt)):
                return found
        path.pop()
        state[node] = 2
        return []

    for start in sorted(graph):
        if start not in state and (found := visit(start)):
            return found
    return []


def test_ledger_and_tui_have_no_import_cycle() -> None:
    graph = import_graph(ROOT)
    assert {"ledger", "ledger.cli", "tui.app", "ledger.loop.engine"} <= set(graph)
    cycle = find_cycle(graph)
    assert not cycle, "import cycle: " + " -> ".join(cycle)


def test_the_check_sees_function_level_relative_and_submodule_imports(tmp_path: Path) -> None:
    pkg = tmp_path / "ledger"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "sub" / "__init__.py").write_text("")
    (pkg / "a.py").write_text("def f():\n    from ledger.sub import b\n")
    (pkg / "sub" / "b.py").write_text("from . import c\n")
    (pkg / "sub" / "c.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import ledger.a\nimport ledger.a as again\n"
    )
    graph = import_graph(tmp_path, ("ledger",))
    assert graph["ledger.a"] == {"ledger.sub.b"}
    assert graph["ledger.sub.b"] == {"ledger.sub.c"}
    assert find_cycle(graph) == ["ledger.a", "ledger.sub.b", "ledger.sub.c", "ledger.a"]


def test_type_checking_imports_count(tmp_path: Path) -> None:
    pkg = tmp_path / "tui"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "app.py").write_text("from tui.screen import Screen\n")
    (pkg / "screen.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from tui.app import App\nScreen = 1\n"
    )
    graph = import_graph(tmp_path, ("tui",))
    assert graph == {"tui": set(), "tui.app": {"tui.screen"}, "tui.screen": {"tui.app"}}
    assert find_cycle(graph) == ["tui.app", "tui.screen", "tui.app"]
