"""The SQL console's table browser: the ledger's views, tables and detectors, with their columns and
parameters, as a tree; ``Enter`` on a name puts it in the editor.

What the ledger holds is read through the monitor's read-only ``query`` (DuckDB's ``duckdb_columns()``
and ``duckdb_functions()``, which the console may query too), so the browser shows what a query can
read, and nothing the TUI would have to know of the ledger's insides.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Final

from rich.text import Text
from textual import on, work
from textual.binding import Binding, BindingType
from textual.message import Message
from textual.widgets import Tree
from textual.worker import get_current_worker

from ledger.monitor import Monitor
from tui import format as fmt

COLUMNS_SQL: Final = """
SELECT c.table_name, CASE WHEN v.view_name IS NULL THEN 'table' ELSE 'view' END AS kind,
       c.column_name, c.data_type
FROM duckdb_columns() c
LEFT JOIN duckdb_views() v ON v.view_name = c.table_name AND v.schema_name = c.schema_name
WHERE NOT c.internal AND c.schema_name = 'main'
ORDER BY kind DESC, c.table_name, c.column_index
"""
"""Every view's and table's columns, views first."""
DETECTORS_SQL: Final = """
SELECT function_name, parameters FROM duckdb_functions()
WHERE function_type = 'table_macro' AND NOT internal AND schema_name = 'main'
ORDER BY function_name
"""
"""The detectors: the ledger's table macros and their parameters."""


@dataclass(frozen=True)
class Relation:
    """A view, table or detector: its name, its kind and its columns (a detector: its parameters)."""

    name: str
    kind: str
    columns: tuple[tuple[str, str], ...]
    """(name, type) per column; a detector's parameters with an empty type."""

    @property
    def insert(self) -> str:
        """What ``Enter`` on it puts in the editor: a view or table's name, a detector's call."""
        return f"{self.name}()" if self.kind == "detector" else self.name


def relations(columns: Sequence[Sequence[Any]], detectors: Sequence[Sequence[Any]]) -> list[Relation]:
    """The views, tables and detectors, from ``COLUMNS_SQL``'s and ``DETECTORS_SQL``'s rows."""
    found: dict[str, tuple[str, list[tuple[str, str]]]] = {}
    for table, kind, column, data_type in columns:
        found.setdefault(str(table), (str(kind), []))[1].append((str(column), str(data_type)))
    out = [Relation(name, kind, tuple(cols)) for name, (kind, cols) in found.items()]
    out += [
        Relation(str(name), "detector", tuple((str(p), "") for p in params or ()))
        for name, params in detectors
    ]
    return out


class SchemaTree(Tree[str]):
    """Views, tables and detectors (expand one for its columns); ``Enter`` inserts the name under the
    cursor into the editor (``Insert``)."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("enter", "select_cursor", "Insert name"),
        Binding("k", "cursor_up", "Up", show=False),
        Binding("j", "cursor_down", "Down", show=False),
        Binding("right,l", "expand", "Expand", show=False),
        Binding("left,h", "collapse", "Collapse", show=False),
    ]

    class Insert(Message):
        """A name to put in the editor at its cursor."""

        def __init__(self, text: str) -> None:
            super().__init__()
            self.text = text

    class Loaded(Message):
        """The worker read the ledger's relations (or failed: ``error``)."""

        def __init__(self, found: list[Relation], error: str) -> None:
            super().__init__()
            self.found = found
            self.error = error

    def __init__(self, monitor: Callable[[], Monitor | None], *, id: str | None = None) -> None:
        super().__init__("ledger", id=id)
        self.monitor = monitor
        self.show_root = False
        self.auto_expand = False
        self.found: list[Relation] = []
        self.loaded = False

    def load(self) -> None:
        """Read the relations once the ledger is open (again after a failure)."""
        if not self.loaded and self.monitor() is not None:
            self.read_relations()

    @work(thread=True, exclusive=True, group="schema")
    def read_relations(self) -> None:
        """Query the ledger's catalogue (two read-only queries)."""
        monitor = self.monitor()
        if monitor is None:
            return
        try:
            found = relations(monitor.query(COLUMNS_SQL).rows, monitor.query(DETECTORS_SQL).rows)
            message = self.Loaded(found, "")
        except Exception as exc:  # one line in the tree, never a traceback
            message = self.Loaded([], " ".join(str(exc).split()))
        if not get_current_worker().is_cancelled:
            self.post_message(message)

    def on_schema_tree_loaded(self, message: Loaded) -> None:
        """Show the relations, grouped by kind."""
        self.clear()
        if message.error:
            self.root.add_leaf(Text(message.error, style=fmt.RED))
            return
        self.loaded, self.found = True, message.found
        for relation in message.found:
            label = Text(relation.name)
            label.append(f" {relation.kind}", style=fmt.GREY)
            node = self.root.add(label, data=relation.insert)
            for column, data_type in relation.columns:
                leaf = Text(column)
                if data_type:
                    leaf.append(f" {data_type.lower()}", style=fmt.GREY)
                node.add_leaf(leaf, data=column)
        self.move_cursor_to_line(0)

    @on(Tree.NodeSelected)
    def _selected(self, event: Tree.NodeSelected[str]) -> None:
        event.stop()
        if event.node.data:
            self.post_message(self.Insert(event.node.data))

    def action_expand(self) -> None:
        """Show the columns of the relation under the cursor."""
        if self.cursor_node is not None and self.cursor_node.allow_expand:
            self.cursor_node.expand()

    def action_collapse(self) -> None:
        """Hide the columns (on a column: go to its relation)."""
        node = self.cursor_node
        if node is None:
            return
        if node.allow_expand and node.is_expanded:
            node.collapse()
        elif node.parent is not None and node.parent is not self.root:
            self.move_cursor(node.parent)
