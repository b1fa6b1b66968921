"""How numbers look on screen: units, "n/a" for unknown values, bars and sparklines.

Every formatter takes ``None`` for a value a source could not read and shows ``n/a``; an
unknown is never shown as 0.
"""

from __future__ import annotations

from collections.abc import Sequence

from gpucon.model.ages import fmt_elapsed
from gpucon.model.alert_base import fmt_wait
from gpucon.model.queue_wait import OldestWait, fmt_at_least

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


def wait(value: float | None) -> str:
    """How long the oldest request has waited, in the words the alerts use for it (``9.6 s``,
    ``4.2 min``), so the queue panel and an alert never write one wait two ways."""
    return NA if value is None else fmt_wait(value)


def oldest_wait(value: OldestWait | None) -> str:
    """A queue's oldest wait: as ``wait`` writes it, or a lower bound (``≥45 s``) while the
    read it came from is stale and something waited then."""
    if value is None:
        return NA
    return fmt_at_least(value.seconds) if value.at_least else fmt_wait(value.seconds)


def since(value: float | None) -> str:
    """How long ago: ``<2s``, ``5s``, ``15s``, ``12m`` (``model.alert_base.fmt_elapsed``, the
    one age format: the status bar, the alerts, the stale cells and the detail all use it, so
    one screen never says ``<10s`` and ``5s`` for the same outage)."""
    if value is None:
        return NA
    return fmt_elapsed(value)


def age(value: float) -> str:
    """A stale value's age beside it in a cell (``·7s``, ``·45s``, ``·12m``): ``since``."""
    return fmt_elapsed(value)


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
