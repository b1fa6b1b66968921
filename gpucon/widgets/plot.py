"""History plots for the detail screen: a small area chart of one series, with its scale.

``area_rows`` is pure (block characters in eighths of a cell); ``Plot`` is the widget. A gap
in a series (no sample, or a stale one: the hub appends ``None``) is drawn as a gap, so a plot
stops where fresh data stops instead of repeating the last value. Under the chart a time axis
says how far back it reaches (``-2m … -1m … now``, one column a sample); a limit (the p95
plot's SLO) is drawn as a dashed line at its height.
"""

from __future__ import annotations

from collections.abc import Sequence

from rich.text import Text

from gpucon.widgets import fmt
from gpucon.widgets.safe_text import safe
from gpucon.widgets.text_panel import TextPanel

_EIGHTHS = " ▁▂▃▄▅▆▇█"


def area_rows(values: Sequence[float | None], width: int, height: int, top: float) -> list[str]:
    """``height`` lines of an area chart of the last ``width`` samples scaled to ``top``."""
    tail: list[float | None] = [None] * max(0, width - len(values[-width:]))
    tail.extend(values[-width:])
    top = top if top > 0 else 1.0
    levels = [None if v is None else round(max(0.0, min(v, top)) / top * height * 8) for v in tail]
    rows: list[str] = []
    for line in range(height - 1, -1, -1):
        base = line * 8
        chars = []
        for level in levels:
            if level is None:
                chars.append("·" if line == 0 else " ")
            else:
                chars.append(_EIGHTHS[max(0, min(8, level - base))])
        rows.append("".join(chars))
    return rows


def limit_row(limit: float, top: float, height: int) -> int | None:
    """The chart line (0 = top) a limit falls on, or None when it is off the chart."""
    if top <= 0 or not 0 < limit <= top:
        return None
    return max(0, min(height - 1, height - 1 - int(limit / top * height - 1e-9)))


def time_axis(width: int, sample_s: float) -> str:
    """``-2m`` at the left edge, the midpoint, ``now`` at the right: one column a sample."""
    axis = [" "] * width
    for at, label in (
        (0, f"-{fmt.seconds(width * sample_s)}"),
        (width // 2 - 2, f"-{fmt.seconds((width - width // 2) * sample_s)}"),
        (width - 3, "now"),
    ):
        if at >= 0 and at + len(label) <= width:
            axis[at : at + len(label)] = label
    return "".join(axis)


def _num(value: float | None) -> str:
    return fmt.number(value, 0 if value is not None and abs(value) >= 100 else 1)


class Plot(TextPanel):
    """A titled area chart of one history series."""

    def __init__(
        self,
        title: str,
        *,
        unit: str = "",
        top: float | None = None,
        limit: float | None = None,
        limit_name: str = "limit",
        height: int = 4,
        sample_s: float | None = None,
        id: str | None = None,
    ) -> None:
        super().__init__(id=id, classes="plot")
        self.title = title
        self.unit = unit
        self.top = top
        self.limit = limit
        self.limit_name = limit_name
        self.rows = height
        # seconds between samples (the refresh): the time axis; None leaves it out
        self.sample_s = sample_s

    _values: Sequence[float | None] = ()
    _limit: float | None = None

    def on_resize(self) -> None:
        self.show_values(self._values, self._limit)

    def show_values(self, values: Sequence[float | None], limit: float | None = None) -> None:
        limit = self.limit if limit is None else limit
        self._values, self._limit = values, limit
        width = max(10, (self.content_region.width or 80) - 10)
        known = [v for v in values if v is not None]
        top = self.top or max([*known, limit or 0.0, 1.0])
        # the newest sample, not the newest known one: a gap (stale or unread) is "n/a" now
        latest = values[-1] if values else None
        text = Text(no_wrap=True)
        text.append_text(safe(self.title, 60, "bold"))
        text.append(f"  now {_num(latest)}{'' if latest is None else self.unit}", style="bold")
        if latest is None and known:
            gap = next(i for i, v in enumerate(reversed(values)) if v is not None)
            text.append(f" (last {gap} {'sample' if gap == 1 else 'samples'} stale or missing)")
        if known:
            text.append(f"  min {_num(min(known))}  max {_num(max(known))}")
        else:
            text.append("  n/a: no samples", style="italic")
        if limit is not None:
            over = latest is not None and latest > limit
            text.append(
                f"  {self.limit_name} {fmt.number(limit, 0)}{self.unit}{' (over)' if over else ''}",
                style=self.theme_style("latency-breach") if over else "dim",
            )
        text.append("\n")
        chart = area_rows(values, width, self.rows, top)
        at = None if limit is None else limit_row(limit, top, self.rows)
        area = self.theme_style("primary").replace("bold ", "")
        for i, row in enumerate(chart):
            label = fmt.number(top, 0) if i == 0 else ("0" if i == len(chart) - 1 else "")
            if i == at:  # the limit's line: dashes where the area does not reach it
                name = self.limit_name[:3].upper()
                label = f"{name} {fmt.number(limit, 0)}"
                text.append(f"{label if len(label) <= 8 else name:>8} ", style="bold")
                for ch in row:
                    if ch == " ":
                        text.append("╌", style=self.theme_style("latency-breach"))
                    else:
                        text.append(ch, style=area)
                text.append("\n")
                continue
            text.append(f"{label:>8} ", style="dim")
            text.append(row + "\n", style=area)
        if self.sample_s:
            text.append(" " * 9 + time_axis(width, self.sample_s), style="dim")
        text.rstrip()
        self.show_text(text)
