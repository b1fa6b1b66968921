"""Which cells of a panel's text changed: the runs a panel repaints instead of its whole region.

A panel that repaints all of itself when one digit changes rewrites every line it covers,
blank ones included (a GPU's power in the GPU panel: 13 lines of 62 cells each second). The
terminal then gets only the changed run of each changed line, as the slot table's changed
columns do, so a steady screen sends next to nothing.
"""

from __future__ import annotations

from rich.cells import cell_len
from rich.style import Style
from rich.text import Text

# (character, the styles of the spans over it, in order): two cells draw the same when equal
_Cell = tuple[str, tuple[str | Style, ...]]


def _cells(line: Text) -> list[_Cell]:
    plain = line.plain
    styles: list[list[str | Style]] = [[] for _ in plain]
    for span in line.spans:
        for k in range(max(0, span.start), min(len(plain), span.end)):
            styles[k].append(span.style)
    return [(ch, tuple(st)) for ch, st in zip(plain, styles, strict=True)]


def _changed_run(old: Text, new: Text) -> tuple[int, int] | None:
    """The first changed cell and the cell after the last changed one, or None if equal."""
    if old.plain == new.plain and old.spans == new.spans and old.style == new.style:
        return None
    if old.style != new.style:  # the whole line's style
        return 0, max(old.cell_len, new.cell_len, 1)
    a, b = _cells(old), _cells(new)
    common = min(len(a), len(b))
    head = 0
    while head < common and a[head] == b[head]:
        head += 1
    if head == len(a) == len(b):  # same cells, spans only split differently
        return None
    start = cell_len(new.plain[:head])
    old_end, new_end = old.cell_len, new.cell_len
    if old_end != new_end:  # what follows the change moved: all of it is repainted
        return start, max(old_end, new_end)
    tail = 0  # an equal tail stays where it was
    while tail < common - head and a[-1 - tail] == b[-1 - tail]:
        tail += 1
    end = max(cell_len(old.plain[: len(a) - tail]), cell_len(new.plain[: len(b) - tail]))
    return start, max(end, start + 1)


def changed_cells(old: Text, new: Text) -> list[tuple[int, int, int]]:
    """``(line, first cell, cells)`` of the one run that changed on each changed line.

    Lines are the text's lines (no wrapping: the panels lay their lines out themselves); a
    line only one of the texts has is compared with an empty one, so lines that went are
    blanked and lines that came are drawn.
    """
    before = list(old.split("\n", allow_blank=True))
    after = list(new.split("\n", allow_blank=True))
    runs: list[tuple[int, int, int]] = []
    for y in range(max(len(before), len(after))):
        run = _changed_run(
            before[y] if y < len(before) else Text(), after[y] if y < len(after) else Text()
        )
        if run is not None:
            runs.append((y, run[0], run[1] - run[0]))
    return runs
