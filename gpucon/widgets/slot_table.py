"""The slot table: a Line-API ScrollView that draws only visible rows and re-renders only rows
whose shown values changed.

Each row's Strip is cached under the row key together with the values it was drawn from;
``render_line`` returns the cached Strip when nothing it shows changed. After a snapshot the
table marks dirty only the lines whose (row, values) differ from what they showed last time,
so a tick costs O(changed visible rows), whatever the fleet's size. The stock DataTable
repaints every visible row on any update (~130 ms a tick measured), which a live table cannot
afford.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

from rich.segment import Segment
from rich.style import Style
from textual import events
from textual.binding import Binding, BindingType
from textual.geometry import Region, Size
from textual.message import Message
from textual.scroll_view import ScrollView
from textual.strip import Strip

from gpucon.model.history import History
from gpucon.widgets import fmt
from gpucon.widgets.row_builder import Rows, same_keys
from gpucon.widgets.row_order import DEFAULT_SORT, RowOrder, first_row_of
from gpucon.widgets.slot_cells import Cell
from gpucon.widgets.slot_rows import (
    COLUMN_KEYS,
    Column,
    RowKey,
    RowValues,
    layout,
    natural_widths,
)
from gpucon.widgets.slot_strips import header_strip, row_cells, row_strip

STYLE_NAMES = ("hot", "breach", "warn", "ok", "dim", "na", "bar", "stale")


class SlotTable(ScrollView, can_focus=True):
    """Slots and their backends, one row per (slot, backend), sorted and filtered."""

    COMPONENT_CLASSES: ClassVar[set[str]] = {
        "slot-table--header",
        "slot-table--sorted",
        "slot-table--cursor",
        *(f"slot-table--{n}" for n in STYLE_NAMES),
    }
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("up,k", "cursor(-1)", "Up", show=False, id="cursor_up"),
        Binding("down,j", "cursor(1)", "Down", show=False, id="cursor_down"),
        Binding("pageup", "page(-1)", "Page up", show=False, id="page_up"),
        Binding("pagedown", "page(1)", "Page down", show=False, id="page_down"),
        Binding("home", "cursor_to(0)", "First", show=False, id="first_row"),
        Binding("end", "cursor_to(-1)", "Last", show=False, id="last_row"),
        Binding("enter", "select", "Detail", id="open_detail"),
    ]

    class Selected(Message):
        """Enter or a double click on a row: open its detail."""

        def __init__(self, key: RowKey) -> None:
            super().__init__()
            self.key = key

    def __init__(self, *, name: str | None = None, id: str | None = None) -> None:
        super().__init__(name=name, id=id)
        self.order = RowOrder()
        self.history = History()
        self.cursor = 0
        self.cursor_key: RowKey | None = None
        self.row_renders = 0  # rows drawn (cache misses): tests and benchmarks read it
        # scroll to keep the selected row in view when a re-sort moves it (off on NOC pages)
        self.follow_cursor = True
        self._strips: dict[RowKey, tuple[tuple[Any, ...], Strip]] = {}
        self._shown: dict[int, tuple[Any, ...]] = {}
        # (content width, scroll offset, TREND width) while ``render_lines`` paints, else None
        self._painting: tuple[int, int, int] | None = None
        # TREND sparklines of the history view they were drawn from, by (slot, width)
        self._sparks: tuple[History | None, dict[tuple[str, int], str]] = (None, {})
        # each shown row's cells: (row, TREND, columns, cells) by row key (``_cells``)
        self._row_cells: dict[RowKey, tuple[RowValues, str, object, list[Cell]]] = {}
        self._header: tuple[tuple[Any, ...], Strip] | None = None
        self._layout: tuple[int, list[tuple[Column, int, int]]] = (-1, [])
        self._styles: dict[str, Style] | None = None
        self._natural: dict[str, int] | None = None
        self._measured: Mapping[RowKey, RowValues] | None = None
        self._measured_token: tuple[object, int] | None = None
        # column titles that depend on the snapshot (the rate window of REQ/S)
        self._titles: dict[str, str] = {}
        # what the first line says while no row is shown (``empty_table``)
        self.empty_note = ""

    # -- data ------------------------------------------------------------------------------

    def show_rows(
        self,
        rows: Mapping[RowKey, RowValues],
        history: History,
        problems: dict[RowKey, int] | None = None,
    ) -> None:
        """Take this tick's rows (and which have alerts); dirty only the lines whose shown
        values changed."""
        self.order.update(rows, problems)
        self.history = history
        self._measure(rows)
        if len(self._strips) > 2 * len(rows) + 256:  # forget strips of rows long gone
            self._strips = {k: v for k, v in self._strips.items() if k in rows}
        self._after_reorder()
        self._refresh_changed_lines()

    def set_empty_note(self, note: str) -> None:
        """What the table's first line says while it shows no row (why it is empty)."""
        if note != self.empty_note:
            self.empty_note = note
            if not self.order.keys:
                self.refresh(Region(0, 1, self.size.width, 1))

    def set_rate_window(self, window: str | None) -> None:
        """Name the window REQ/S is a rate over in its title (``REQ/S 1m``)."""
        title = f"REQ/S {window}" if window else "REQ/S"
        if self._titles.get("rps") != title:
            self._titles["rps"] = title
            self._header = None
            self.refresh(Region(0, 0, self.size.width, 1))

    def set_sort(self, key: str, reverse: bool) -> None:
        self.order.set_sort(key, reverse)
        self._after_reorder()
        self.refresh()

    def cycle_sort(self, step: int = 1) -> None:
        """The next sort: the stable default order, then each column in turn."""
        keys = (DEFAULT_SORT, *COLUMN_KEYS)
        index = keys.index(self.order.sort_key) if self.order.sort_key in keys else 0
        key = keys[(index + step) % len(keys)]
        names = (DEFAULT_SORT, "host", "gpu", "slot", "profile", "backend", "state")
        self.set_sort(key, key not in names)

    def select_key(self, key: RowKey) -> bool:
        """Put the selection on row ``key`` (clearing a filter that hides it); False if gone."""
        if key not in self.order.rows:
            return False
        if key not in self.order.keys:
            self.set_filter("")
        self.move_cursor(self.order.keys.index(key))
        top = round(self.scroll_y)
        if not top <= self.cursor < top + self.page_rows:
            self.scroll_to(y=max(0, self.cursor - self.page_rows // 3), animate=False)
        self.refresh()
        return True

    def select_target(self, target: str) -> bool:
        """Select the first row that alert target ``target`` names (backend, slot or GPU)."""
        key = first_row_of(self.order.keys, target)
        if key is None:
            key = first_row_of(sorted(self.order.rows), target)
        return key is not None and self.select_key(key)

    def set_filter(self, text: str) -> None:
        self.order.set_filter(text)
        self._after_reorder()
        self.refresh()

    @property
    def content_width(self) -> int:
        """Cells a row may use: the widget's width less the vertical scrollbar."""
        return self.scrollable_content_region.width

    @property
    def trend_width(self) -> int:
        """How many samples TREND shows (0: the column is not shown at this width)."""
        return self._trend_width(self.content_width)

    def _trend_width(self, width: int) -> int:
        return next((w for c, _, w in self._columns(width) if c.key == "trend"), 0)

    @property
    def row_count(self) -> int:
        return len(self.order.keys)

    _last_page_rows = 1

    @property
    def page_rows(self) -> int:
        """Rows a page shows; while the table is hidden (a NOC alerts page), the last known."""
        if self.size.height > 1:
            self._last_page_rows = self.size.height - 1
        return self._last_page_rows

    def _after_reorder(self) -> None:
        keys = self.order.keys
        top = round(self.scroll_y)
        was_visible = top <= self.cursor < top + self.page_rows
        line = self.cursor - top  # the screen line the selected row was on
        if self.cursor_key is not None and self.cursor_key in self.order.rows:
            try:
                self.cursor = keys.index(self.cursor_key)
            except ValueError:  # filtered out: keep the position
                self.cursor = min(self.cursor, max(0, len(keys) - 1))
        else:
            self.cursor = min(self.cursor, max(0, len(keys) - 1))
        self.cursor_key = keys[self.cursor] if keys else None
        # the width never scrolls (overflow-x hidden): a virtual width that follows the
        # widget's would relayout and repaint the whole table on the first tick after mount
        self.virtual_size = Size(0, len(keys) + 1)
        if self.follow_cursor and was_visible and not top <= self.cursor < top + self.page_rows:
            # a re-sort moved the selected row out of view: follow it, on the same line
            self.scroll_to(y=max(0, self.cursor - line), animate=False, immediate=True)

    # -- drawing ---------------------------------------------------------------------------

    def notify_style_update(self) -> None:
        super().notify_style_update()
        self._styles = None
        self._strips.clear()
        self._header = None

    def _style_map(self) -> dict[str, Style]:
        if self._styles is None:
            base = self.rich_style
            styles = {
                "": base,
                "header": base + self.get_component_rich_style("slot-table--header"),
            }
            styles["sorted"] = styles["header"] + self.get_component_rich_style(
                "slot-table--sorted"
            )
            styles["cursor"] = self.get_component_rich_style("slot-table--cursor")
            for n in STYLE_NAMES:
                styles[n] = base + self.get_component_rich_style(f"slot-table--{n}")
            self._styles = styles
        return self._styles

    def _columns(self, width: int | None = None) -> list[tuple[Column, int, int]]:
        """The columns placed at ``width`` cells (the content width when not given: callers
        that already read it pass it, as reading it asks the scrollbars again)."""
        if width is None:
            width = self.content_width
        if self._layout[0] != width:
            self._layout = (width, layout(width, self._natural))
        return self._layout[1]

    def _measure(self, rows: Mapping[RowKey, RowValues]) -> None:
        """Re-measure the name columns when the set of rows or their names changed (not on
        every tick); only the rows' names are read."""
        token = rows.names_token if isinstance(rows, Rows) else None
        if token is not None and token == self._measured_token and same_keys(rows, self._measured):
            return
        self._measured, self._measured_token = rows, token
        names = rows.name_of if isinstance(rows, Rows) else rows.__getitem__
        natural = natural_widths(names(k) for k in rows)
        if natural != self._natural:
            self._natural = natural
            self._layout = (-1, [])
            self._header = None
            self.refresh()

    def _spark(self, row: RowValues, width: int) -> str:
        """The row's TREND: worked out once per history view (a tick's) and width, though
        a tick reads each shown row's twice (what changed, then drawing it)."""
        history = self.history
        memo = self._sparks
        if memo[0] is not history or len(memo[1]) > 4096:  # a held view scrolled through
            memo = self._sparks = (history, {})
        found = memo[1].get((row.slot_id, width))
        if found is None:
            # the newest ``width`` samples, all a sparkline shows (not the history's 120)
            series = history.tail(f"slot:{row.slot_id}:activity", width)
            found = memo[1][(row.slot_id, width)] = fmt.sparkline(series, width, 100.0)
        return found

    def _line_key(self, index: int, width: int, trend: int) -> tuple[Any, ...]:
        """What line ``index`` shows at ``width`` cells with a TREND ``trend`` wide."""
        key = self.order.keys[index]
        row = self.order.rows[key]
        spark = self._spark(row, trend) if trend else ""
        return (key, row, spark, index == self.cursor, width)

    def _blank(self, index: int) -> tuple[str, ...]:
        """The key of a line below the rows: the empty table's note on its first line."""
        if index == 0 and not self.order.keys and self.empty_note:
            return ("empty", self.empty_note)
        return ("blank",)

    def _refresh_changed_lines(self) -> None:
        height = self.size.height
        top = round(self.scroll_y)
        count = len(self.order.keys)
        width = self.content_width
        trend = self._trend_width(width)
        # one refresh with every changed span: a refresh a span costs Textual's dirty-region
        # bookkeeping (content offset, styles cache) each time, ~80 times a tick at worst
        regions: list[Region] = []
        for y in range(1, height):
            index = top + y - 1
            line_key = self._line_key(index, width, trend) if index < count else self._blank(index)
            shown = self._shown.get(y)
            if shown != line_key:
                regions += [
                    Region(x, y, span, 1) for x, span in self._changed_spans(shown, line_key, width)
                ]
        if regions:
            self.refresh(*regions)

    def _changed_spans(
        self, shown: tuple[Any, ...] | None, line_key: tuple[Any, ...], width: int
    ) -> list[tuple[int, int]]:
        """The cells of a line to repaint: the column whose text or style changed when the
        same row is still shown the same way and only one did, else the whole line. Textual
        writes only the repainted cells to the terminal, so one changed number costs its
        cells, not a line; but each span it writes starts again (a cursor move, the style
        from scratch): two or more cost more bytes than the line (at 512 GPUs, 180 columns,
        16 KiB a tick with every value changing against 10.6 KiB; 3.3 against 2.7 KiB for
        the simulator's own changes)."""
        whole = [(0, width)]
        if (
            shown is None
            or len(shown) != len(line_key)
            or len(line_key) != 5
            or shown[0] != line_key[0]
            or shown[3:] != line_key[3:]
            or shown[1].stale != line_key[1].stale
        ):
            return whole
        columns = self._columns(width)
        old = self._cells(shown[0], shown[1], shown[2], columns, keep=False)
        new = self._cells(line_key[0], line_key[1], line_key[2], columns)
        spans = [(x, w + 1) for (_, x, w), a, b in zip(columns, old, new, strict=True) if a != b]
        return spans if len(spans) < 2 else whole

    def _cells(
        self,
        key: RowKey,
        row: RowValues,
        spark: str,
        columns: list[tuple[Column, int, int]],
        keep: bool = True,
    ) -> list[Cell]:
        """``row_cells`` of a shown row, kept per row key while its values, TREND and the
        columns are the same: a changed line compares its cells and then draws them."""
        hit = self._row_cells.get(key)
        if hit is not None and hit[0] is row and hit[1] == spark and hit[2] is columns:
            return hit[3]
        cells = row_cells(row, spark, columns)
        if keep:
            if len(self._row_cells) > 4096:  # rows scrolled through long ago
                self._row_cells.clear()
            self._row_cells[key] = (row, spark, columns, cells)
        return cells

    def render_lines(self, crop: Region) -> list[Strip]:
        # the width and the scroll offset read once for the lines of one paint, not once a
        # line (each reads the widget's region, styles and scrollbars again: ~10 µs)
        width = self.content_width
        self._painting = (width, round(self.scroll_y), self._trend_width(width))
        try:
            return super().render_lines(crop)
        finally:
            self._painting = None

    def render_line(self, y: int) -> Strip:
        painting = self._painting
        if painting is None:
            width = self.content_width
            painting = (width, round(self.scroll_y), self._trend_width(width))
        width, top, trend = painting
        if y == 0:
            return self._render_header(width)
        index = top + y - 1
        if index >= len(self.order.keys):
            self._shown[y] = blank = self._blank(index)
            if len(blank) > 1:  # the first line of an empty table: why it is empty
                style = self._style_map()["dim"]
                return Strip([Segment(f" {blank[1]}", style)]).crop_extend(0, width, None)
            return Strip.blank(width, self._style_map()[""])
        line_key = self._line_key(index, width, trend)
        self._shown[y] = line_key
        key = line_key[0]
        cached = self._strips.get(key)
        if cached is not None and cached[0] == line_key:
            return cached[1]
        strip = self._render_row(key, line_key[1], line_key[2], line_key[3], width)
        self._strips[key] = (line_key, strip)
        self.row_renders += 1
        return strip

    def _render_row(
        self, key: RowKey, row: RowValues, spark: str, is_cursor: bool, width: int
    ) -> Strip:
        columns = self._columns(width)
        cells = self._cells(key, row, spark, columns)
        return row_strip(row, spark, columns, self._style_map(), is_cursor, width, cells)

    def _render_header(self, width: int) -> Strip:
        header_key = (width, self.order.sort_key, self.order.reverse)
        if self._header is not None and self._header[0] == header_key:
            return self._header[1]
        strip = header_strip(
            self._columns(width),
            self._style_map(),
            self.order.sort_key,
            self.order.reverse,
            width,
            self._titles,
        )
        self._header = (header_key, strip)
        return strip

    # -- cursor and mouse ------------------------------------------------------------------

    def move_cursor(self, index: int) -> None:
        keys = self.order.keys
        if not keys:
            return
        old = self.cursor
        self.cursor = max(0, min(index, len(keys) - 1))
        self.cursor_key = keys[self.cursor]
        top = round(self.scroll_y)
        if self.cursor < top:
            self.scroll_to(y=self.cursor, animate=False)
        elif self.cursor >= top + self.page_rows:
            self.scroll_to(y=self.cursor - self.page_rows + 1, animate=False)
        for i in (old, self.cursor):
            self.refresh(Region(0, i - round(self.scroll_y) + 1, self.content_width, 1))

    def action_cursor(self, step: int) -> None:
        self.move_cursor(self.cursor + step)

    def action_page(self, step: int) -> None:
        self.move_cursor(self.cursor + step * self.page_rows)

    def action_cursor_to(self, index: int) -> None:
        self.move_cursor(index if index >= 0 else len(self.order.keys) - 1)

    def action_select(self) -> None:
        if self.cursor_key is not None:
            self.post_message(self.Selected(self.cursor_key))

    def show_page(self, page: int) -> None:
        """Scroll so that page ``page`` of rows is in view (NOC mode cycles pages)."""
        self.scroll_to(y=page * self.page_rows, animate=False)

    def column_at(self, x: int) -> Column | None:
        for column, cx, w in self._columns():
            if cx <= x < cx + w + 1:
                return column
        return None

    def on_click(self, event: events.Click) -> None:
        if event.y == 0:
            column = self.column_at(event.x)
            if column is not None:
                same = column.key == self.order.sort_key
                self.set_sort(column.key, not self.order.reverse if same else True)
            return
        index = round(self.scroll_y) + event.y - 1
        if index < len(self.order.keys):
            self.move_cursor(index)
            if event.chain >= 2:
                self.action_select()

    def on_mouse_move(self, event: events.MouseMove) -> None:
        column = self.column_at(event.x) if event.y == 0 else None
        tip = column.tooltip if column else None
        if column is not None and column.key == "activity" and tip != self.tooltip:
            metrics = sorted({r.metric for r in self.order.rows.values() if r.metric})
            tip = f"activity % from {', '.join(metrics) or 'no source'}"
        if tip != self.tooltip:
            self.tooltip = tip
