"""How numbers look on screen: units, "n/a" for unknown values, bars and sparklines.

Every formatter takes ``None`` for a value a source could not read and shows ``n/a``; an
unknown is never shown as 0.
"""

from __future__ import annotations

from collections.abc import Sequence

NA = "n/a"
_BLOCKS = " ▁▂▃▄▅▆▇█"
_EIGHTHS = " ▏▎▍▌▋▊▉█"


def pct(value: float | None) -> str:
    return NA if value is None else f"{value:.0f}%"


def gib(mib: float | None) -> str:
    if mib is None:
        return NA
    g = mib / 1024.0
    return f"{g:.1f}" if g < 100 else f"{g:.0f}"


def mem(used_mib: float | None, total_mib: float | None) -> str:
    """``31.2/40.0``: used over total in GiB (the label or header names the unit)."""
    if used_mib is None and total_mib is None:
        return NA
    return f"{gib(used_mib)}/{gib(total_mib)}"


def ms(value: float | None) -> str:
    if value is None:
        return NA
    if value >= 100_000:
        return f"{value / 1000:.0f}s"
    return f"{value:.0f}" if value >= 10 else f"{value:.1f}"


def seconds(value: float | None) -> str:
    if value is None:
        return NA
    if value < 10:
        return f"{value:.1f}s"
    if value < 120:
        return f"{value:.0f}s"
    if value < 7200:
        return f"{value / 60:.0f}m"
    return f"{value / 3600:.0f}h"


def since(value: float | None) -> str:
    """How long ago, coarsely: ``<2s``, ``<10s``, then ``age``'s steps (5 s, minutes, hours,
    days; floored), so a source's, an alert's and an XID's age read the same as a stale
    cell's (one screen never says ``10s`` and ``15s`` for the same outage).

    For ages that tick every second (a source's last read, an alert's start): the text
    changes every 5 s at most, so a steady screen is not rewritten every second for a digit
    nobody acts on; the step is always visible (``<2s`` = fresh).
    """
    if value is None:
        return NA
    if value < 2:
        return "<2s"
    if value < 10:
        return "<10s"
    return age(value)


def age(value: float) -> str:
    """A stale value's age, short enough to sit beside it in a cell: ``7s``, ``45s``, ``12m``.

    Whole seconds up to 10 s, then 5 s steps, minutes, hours, days (floored): a stale row's
    text changes at most once a second at first and every 5 s after, not on every tick.
    """
    if value < 10:
        return f"{max(0, int(value))}s"
    if value < 60:
        return f"{int(value // 5) * 5}s"
    if value < 3600:
        return f"{int(value // 60)}m"
    if value < 172_800:
        return f"{int(value // 3600)}h"
    return f"{int(value // 86_400)}d"


def number(value: float | None, digits: int = 0) -> str:
    if value is None:
        return NA
    if abs(value) >= 10_000:
        return f"{value / 1000:.0f}k"
    return f"{value:.{digits}f}"


def count(value: int | None) -> str:
    return NA if value is None else (f"{value / 1000:.0f}k" if value >= 100_000 else str(value))


def bar(value: float | None, width: int, top: float = 100.0) -> str:
    """A horizontal bar in eighths of a cell; blank for unknown values."""
    if value is None or width <= 0:
        return " " * max(width, 0)
    eighths = round(max(0.0, min(value, top)) / top * width * 8)
    full, part = divmod(eighths, 8)
    text = "█" * full + (_EIGHTHS[part] if part else "")
    return text.ljust(width)[:width]


def sparkline(values: Sequence[float | None], width: int, top: float | None = None) -> str:
    """The last ``width`` samples as block characters; unknown samples are blank."""
    tail = list(values[-width:]) if width > 0 else []
    known = [v for v in tail if v is not None]
    if not known:
        return " " * width
    hi = top if top is not None else max(known)
    hi = hi if hi > 0 else 1.0
    chars = [
        " " if v is None else _BLOCKS[max(1, min(8, round(max(0.0, v) / hi * 8)))] for v in tail
    ]
    return "".join(chars).rjust(width)
