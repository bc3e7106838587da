"""A table that holds any number of rows and paints only the lines in view.

Textual's ``DataTable`` measures every cell of every new row (10,000 sessions took seconds to
show); this table has fixed column widths, so it needs nothing from a row until the row scrolls
into view. It holds row keys in display order; ``render_row(key)`` gives a row's cells when the
row is painted, and the painted line is kept until ``invalidate`` drops it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import ClassVar, Final, NamedTuple

from rich.segment import Segment
from rich.style import Style
from rich.text import Text
from textual import events
from textual.binding import Binding, BindingType
from textual.geometry import Size
from textual.message import Message
from textual.reactive import reactive
from textual.scroll_view import ScrollView
from textual.strip import Strip

GAP: Final = 1
"""Spaces between two columns."""


class Column(NamedTuple):
    """A column: its key, its header label and its width in cells."""

    key: str
    label: str
    width: int


def fit(cell: Text, width: int) -> Text:
    """``cell`` cut (with an ellipsis) or padded to exactly ``width`` cells, as it is justified."""
    text = cell.copy()
    text.truncate(width, overflow="ellipsis")
    justify = text.justify if text.justify in ("left", "center", "right") else "left"
    text.align(justify, width)
    return text


class VirtualTable(ScrollView, can_focus=True):
    """Rows in a given order under a fixed header line; a row cursor; Enter or a click on the
    cursor's row selects; a click on a header asks to sort by that column."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("enter", "select", "Open"),
        Binding("up", "cursor_up", "Up", show=False),
        Binding("down", "cursor_down", "Down", show=False),
        Binding("pageup", "page_up", "Page up", show=False),
        Binding("pagedown", "page_down", "Page down", show=False),
        Binding("home", "first", "First", show=False),
        Binding("end", "last", "Last", show=False),
        # vim's keys (``g`` is taken: it steers the loop under the cursor; Home goes to the first row)
        Binding("k", "cursor_up", "Up", show=False),
        Binding("j", "cursor_down", "Down", show=False),
        Binding("G", "last", "Last", show=False),
    ]
    COMPONENT_CLASSES: ClassVar[set[str]] = {
        "virtual-table--header",
        "virtual-table--cursor",
        "virtual-table--sorted",
    }
    DEFAULT_CSS = """
    VirtualTable { background: $surface; color: $foreground; }
    VirtualTable > .virtual-table--header { background: $panel; text-style: bold; }
    VirtualTable > .virtual-table--sorted { background: $panel; color: $text-accent; text-style: bold; }
    VirtualTable > .virtual-table--cursor {
        background: $block-cursor-blurred-background; color: $block-cursor-blurred-foreground;
    }
    VirtualTable:focus > .virtual-table--cursor {
        background: $block-cursor-background; color: $block-cursor-foreground; text-style: bold;
    }
    """

    cursor_row: reactive[int] = reactive(0, always_update=True)

    class _Event(Message):
        """Something happened to a row or column of the table."""

        def __init__(self, table: VirtualTable, key: str) -> None:
            super().__init__()
            self.table = table
            self.key = key

        @property
        def control(self) -> VirtualTable:
            """The table (for ``@on`` selectors)."""
            return self.table

    class Selected(_Event):
        """A row was chosen (Enter, or a click on the cursor's row): ``key`` is the row's."""

    class HeaderClicked(_Event):
        """A column header was clicked: ``key`` is the column's."""

    def __init__(
        self,
        columns: Sequence[Column],
        render_row: Callable[[str], Sequence[Text]],
        *,
        flex: str | None = None,
        id: str | None = None,
    ) -> None:
        super().__init__(id=id)
        self.columns = list(columns)
        self.flex = flex
        """The column that takes the width left over (its own width is its least)."""
        self._flex_least = next((c.width for c in self.columns if c.key == flex), 0)
        self.render_row = render_row
        self.sorted_column = ""
        self._keys: list[str] = []
        self._index: dict[str, int] = {}
        self._lines: dict[tuple[str, bool], Strip] = {}
        self._width = sum(c.width for c in self.columns) + GAP * (len(self.columns) + 1)
        self.painted = 0
        """Rows turned into lines so far (a line is kept until its row changes)."""

    # -- rows ----------------------------------------------------------------------------------
    @property
    def keys(self) -> list[str]:
        """The row keys in display order."""
        return self._keys

    @property
    def row_count(self) -> int:
        """How many rows the table holds (not how many are painted)."""
        return len(self._keys)

    def index_of(self, key: str) -> int | None:
        """The display index of a row, or ``None``."""
        return self._index.get(key)

    def set_keys(self, keys: Sequence[str], *, keep: str | None = None) -> None:
        """Show these rows in this order; the cursor moves to ``keep``'s new place if given."""
        self._keys = list(keys)
        self._index = {k: i for i, k in enumerate(self._keys)}
        if len(self._lines) > 4 * max(self.size.height, 50):
            self._lines.clear()  # keep only what is likely to be painted again
        self.virtual_size = Size(self._width, len(self._keys) + 1)
        self.fit_flex()
        target = self._index.get(keep) if keep is not None else None
        self.cursor_row = self._clamp(target if target is not None else self.cursor_row)
        self.refresh()

    # -- widths --------------------------------------------------------------------------------
    def set_width(self, key: str, width: int) -> None:
        """Give a column another width (the flexible column gives or takes the difference)."""
        self.columns = [c._replace(width=width) if c.key == key else c for c in self.columns]
        if key == self.flex:
            self._flex_least = width
        self._resized()

    def fit_flex(self) -> None:
        """Let the flexible column take the width the others leave (never less than its least)."""
        if self.flex is None:
            return
        region = self.region.shrink(self.styles.gutter)
        if region.width <= 0:
            return
        bar = self.styles.scrollbar_size_vertical if len(self._keys) + 1 > region.height else 0
        others = sum(c.width for c in self.columns if c.key != self.flex) + GAP * (len(self.columns) + 1)
        width = max(self._flex_least, region.width - bar - others)
        if any(c.key == self.flex and c.width != width for c in self.columns):
            self.columns = [c._replace(width=width) if c.key == self.flex else c for c in self.columns]
            self._resized()

    def _resized(self) -> None:
        """The columns' widths changed: every line is painted again."""
        self._width = sum(c.width for c in self.columns) + GAP * (len(self.columns) + 1)
        self.virtual_size = Size(self._width, len(self._keys) + 1)
        self._lines.clear()
        self.refresh()

    def on_resize(self) -> None:
        """Another size: the flexible column takes what is left."""
        self.fit_flex()

    def invalidate(self, keys: Iterable[str] | None = None) -> None:
        """Forget the painted lines of these rows (all when ``None``) and repaint."""
        if keys is None:
            self._lines.clear()
        else:
            for key in keys:
                self._lines.pop((key, False), None)
                self._lines.pop((key, True), None)
        self.refresh()

    def get_row(self, key: str) -> list[Text]:
        """A row's cells, as they would be painted now."""
        return list(self.render_row(key))

    def get_cell(self, key: str, column: str) -> Text:
        """One cell of a row, by column key."""
        index = [c.key for c in self.columns].index(column)
        return self.get_row(key)[index]

    @property
    def cursor_key(self) -> str | None:
        """The row under the cursor."""
        return self._keys[self.cursor_row] if self._keys else None

    def move_to(self, key: str) -> None:
        """Put the cursor on a row."""
        index = self._index.get(key)
        if index is not None:
            self.cursor_row = index

    # -- painting ------------------------------------------------------------------------------
    def render_line(self, y: int) -> Strip:
        """The header on the first line, then the rows from the scroll position down."""
        scroll_x, scroll_y = self.scroll_offset
        width = self.size.width
        style = self.rich_style
        if y == 0:
            strip = self._header()
        else:
            row = scroll_y + y - 1
            if row >= len(self._keys):
                return Strip.blank(width, style)
            strip = self._row(self._keys[row], row == self.cursor_row)
        return strip.crop_extend(scroll_x, scroll_x + width, style)

    def _segments(self, cells: Sequence[Text], style: Style, header_styles: dict[int, Style]) -> Strip:
        line = Text(" " * GAP, no_wrap=True, end="")
        for n, (column, cell) in enumerate(zip(self.columns, cells, strict=False)):
            fitted = fit(cell, column.width)
            if n in header_styles:
                fitted.stylize(header_styles[n])
            line.append_text(fitted)
            line.append(" " * GAP)
        segments = list(line.render(self.app.console))
        return Strip(Segment.apply_style(segments, style), self._width)

    def _header(self) -> Strip:
        header = self.get_component_rich_style("virtual-table--header")
        sorted_style = self.get_component_rich_style("virtual-table--sorted", partial=True)
        labels = [Text(c.label) for c in self.columns]
        marks = {n: sorted_style for n, c in enumerate(self.columns) if c.key == self.sorted_column}
        return self._segments(labels, self.rich_style + header, marks)

    def _row(self, key: str, under_cursor: bool) -> Strip:
        cached = self._lines.get((key, under_cursor))
        if cached is not None:
            return cached
        if under_cursor:  # the cursor's colours under the cells' own, its background over all
            cursor = self.get_component_rich_style("virtual-table--cursor")
            strip = self._segments(self.render_row(key), self.rich_style + cursor, {})
            over = Style(bgcolor=cursor.bgcolor)
            strip = Strip(Segment.apply_style(list(strip), post_style=over), self._width)
        else:
            strip = self._segments(self.render_row(key), self.rich_style, {})
        self._lines[(key, under_cursor)] = strip
        self.painted += 1
        return strip

    def notify_style_update(self) -> None:
        """The theme changed: paint every line again."""
        super().notify_style_update()
        self._lines.clear()

    # -- the cursor --------------------------------------------------------------------------
    def _clamp(self, row: int) -> int:
        return max(0, min(row, len(self._keys) - 1)) if self._keys else 0

    def validate_cursor_row(self, row: int) -> int:
        """The cursor stays on a row."""
        return self._clamp(row)

    def watch_cursor_row(self, old: int, new: int) -> None:
        """Repaint the two rows and keep the cursor in view."""
        self.scroll_to_row(new)
        self.refresh()

    def scroll_to_row(self, row: int) -> None:
        """Scroll so that ``row`` is in view (below the header)."""
        rows_in_view = max(1, self.size.height - 1)
        top = int(self.scroll_y)
        if row < top:
            self.scroll_to(y=row, animate=False, immediate=True)
        elif row >= top + rows_in_view:
            self.scroll_to(y=row - rows_in_view + 1, animate=False, immediate=True)

    def action_cursor_up(self) -> None:
        """One row up."""
        self.cursor_row -= 1

    def action_cursor_down(self) -> None:
        """One row down."""
        self.cursor_row += 1

    def action_page_up(self) -> None:
        """One screen up."""
        self.cursor_row -= max(1, self.size.height - 2)

    def action_page_down(self) -> None:
        """One screen down."""
        self.cursor_row += max(1, self.size.height - 2)

    def action_first(self) -> None:
        """The first row."""
        self.cursor_row = 0

    def action_last(self) -> None:
        """The last row."""
        self.cursor_row = len(self._keys) - 1

    def action_select(self) -> None:
        """Choose the row under the cursor."""
        key = self.cursor_key
        if key is not None:
            self.post_message(self.Selected(self, key))

    def column_at(self, x: int) -> str | None:
        """The column under content column ``x``."""
        left = GAP
        for column in self.columns:
            if left <= x < left + column.width + GAP:
                return column.key
            left += column.width + GAP
        return None

    def on_click(self, event: events.Click) -> None:
        """A header click asks to sort; a row click moves the cursor there, a second one selects."""
        x = event.x + int(self.scroll_x)
        if event.y == 0:
            column = self.column_at(x)
            if column is not None:
                self.post_message(self.HeaderClicked(self, column))
            return
        row = int(self.scroll_y) + event.y - 1
        if 0 <= row < len(self._keys):
            if row == self.cursor_row or event.chain > 1:
                self.cursor_row = row
                self.action_select()
            else:
                self.cursor_row = row
