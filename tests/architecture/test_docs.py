"""Every public function, method and class of the ``ledger`` package has a docstring.

Public means a name not starting with ``_``, at module level or inside a public
class (nested public classes and their methods included). Functions defined
inside functions, private names and dunders (``__init__`` ...) are skipped.
Definitions under a module- or class-level ``if`` / ``try`` / ``with`` count
as being at that level.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator, Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "ledger"

Definition = ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef


def _statements(body: Sequence[ast.stmt]) -> Iterator[ast.stmt]:
    """The statements of a module or class body, looking inside if / try / with blocks."""
    for node in body:
        if isinstance(node, ast.If):
            yield from _statements(node.body)
            yield from _statements(node.orelse)
        elif isinstance(node, ast.Try | ast.TryStar):
            yield from _statements(node.body)
            for handler in node.handlers:
                yield from _statements(handler.body)
            yield from _statements(node.orelse)
            yield from _statements(node.finalbody)
        elif isinstance(node, ast.With | ast.AsyncWith):
            yield from _statements(node.body)
        else:
            yield node


def public_definitions(body: Sequence[ast.stmt], prefix: str = "") -> Iterator[tuple[str, Definition]]:
    """(qualified name, node) of every public definition in ``body``, recursing into public classes."""
    for node in _statements(body):
        if not isinstance(node, Definition) or node.name.startswith("_"):
            continue
        yield prefix + node.name, node
        if isinstance(node, ast.ClassDef):
            yield from public_definitions(node.body, f"{prefix}{node.name}.")


def undocumented(source: str, label: str) -> list[str]:
    """``label:line name`` for each public definition in ``source`` without a docstring."""
    return [
        f"{label}:{node.lineno} {name}"
        for name, node in public_definitions(ast.parse(source).body)
        if ast.get_docstring(node) is None
    ]


def test_rule_on_a_sample() -> None:
    source = '''
def documented():
    """Yes."""

def bare(): pass

def _private(): pass

def outer():
    """Yes."""
    def inner(): pass

class Public:
    def __init__(self): pass
    def method(self): pass
    def _helper(self): pass
    @property
    def prop(self):
        """Yes."""
    class Nested:
        def deep(self): pass

class _Private:
    def method(self): pass

if True:
    def conditional(): pass
'''
    assert undocumented(source, "m.py") == [
        "m.py:5 bare",
        "m.py:13 Public",
        "m.py:15 Public.method",
        "m.py:20 Public.Nested",
        "m.py:21 Public.Nested.deep",
        "m.py:27 conditional",
    ]


def test_every_public_definition_has_a_docstring() -> None:
    modules = sorted(PACKAGE.rglob("*.py"))
    assert PACKAGE / "__init__.py" in modules and PACKAGE / "storage" / "sql" / "__init__.py" in modules
    checked = 0
    missing: list[str] = []
    for path in modules:
        source = path.read_text(encoding="utf-8")
        checked += sum(1 for _ in public_definitions(ast.parse(source).body))
        missing += undocumented(source, str(path.relative_to(ROOT)))
    assert checked > 100, f"only {checked} public definitions found: is the walk broken?"
    assert not missing, f"{len(missing)} public definitions lack a docstring:\n" + "\n".join(missing)
