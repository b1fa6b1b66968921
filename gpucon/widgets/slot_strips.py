"""One slot-table line as a Strip of Segments, drawn straight from a row's values.

Pure rendering (no widget state): the table caches what these return and calls them only
for rows whose shown values changed. Styles come in by name ("hot", "breach", ...) from the
theme (a stale value's cell says so itself: style "stale"); the cursor row is styled over
each cell's own style.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from rich.segment import Segment
from rich.style import Style
from textual.strip import Strip

from gpucon.widgets.safe_text import pad
from gpucon.widgets.slot_cells import Cell, cell
from gpucon.widgets.slot_rows import Column, RowValues

Placed = Sequence[tuple[Column, int, int]]
_SIGNALS = frozenset({"hot", "breach", "warn", "ok", "stale"})


def row_cells(row: RowValues, spark: str, columns: Placed) -> list[Cell]:
    """Each column's (text, style name) for ``row``, in the columns' order."""
    return [cell(column.cell_key or column.key, row, w, spark) for column, _, w in columns]


def row_strip(
    row: RowValues,
    spark: str,
    columns: Placed,
    styles: Mapping[str, Style],
    is_cursor: bool,
    width: int,
    cells: Sequence[Cell] | None = None,
) -> Strip:
    """The row's line; ``cells``: its ``row_cells``, when the caller has them already."""
    if cells is None:
        cells = row_cells(row, spark, columns)
    cursor = styles["cursor"] if is_cursor else None
    blank = styles[""] + cursor if cursor is not None else styles[""]
    # neighbours of one style are joined into one segment (the gaps mostly): fewer segments
    # to filter and compose, and fewer style changes written to the terminal
    texts: list[str] = []
    seg_styles: list[Style] = []
    for (column, _, w), (text, style_name) in zip(columns, cells, strict=True):
        style = styles[style_name]
        if cursor is not None:
            # the cursor's background wins, but a signal keeps its own colour (over SLO, hot,
            # NOT READY, stale): the selected row is the one an operator reads most closely
            if style_name in _SIGNALS:
                style = style + cursor + Style(color=style.color, bold=True)
            else:
                style = style + cursor
        text = pad(text, w, column.right)
        if texts:
            if seg_styles[-1] == blank:
                texts[-1] += " "
            else:
                texts.append(" ")
                seg_styles.append(blank)
        if seg_styles and seg_styles[-1] == style:
            texts[-1] += text
        else:
            texts.append(text)
            seg_styles.append(style)
    segments = [Segment(t, st) for t, st in zip(texts, seg_styles, strict=True)]
    return Strip(segments).adjust_cell_length(width, blank)


def header_strip(
    columns: Placed,
    styles: Mapping[str, Style],
    sort_key: str,
    reverse: bool,
    width: int,
    titles: Mapping[str, str] | None = None,
) -> Strip:
    """The header line; ``titles`` replaces a column's title by key (REQ/S with its window)."""
    segments: list[Segment] = []
    for column, _, w in columns:
        sorted_here = column.key == sort_key
        title = (titles or {}).get(column.key, column.title)
        if sorted_here:  # the arrow replaces the title's end when the column is narrow
            arrow = "▼" if reverse else "▲"
            title = f"{title} {arrow}" if len(title) + 2 <= w else f"{title[: w - 1]}{arrow}"
        if segments:
            segments.append(Segment(" ", styles["header"]))
        style = styles["sorted" if sorted_here else "header"]
        segments.append(Segment(pad(title, w, column.right), style))
    return Strip(segments).adjust_cell_length(width, styles["header"])
