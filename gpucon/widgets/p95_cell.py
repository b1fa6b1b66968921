"""The P95/SLO cell's text: one format for every row, both numbers in ms, the SLO always shown.

- ``14/2500``: a current p95 against its SLO (``!`` before it over the SLO, ``~`` within 20 %)
- ``1840/2500·45s``: a stale p95 (its source has not read for two cadences), the last one seen
  with its age, drawn in the stale style and not compared with the SLO
- ``n/a/2500``: no current p95: none reported, or the backend is NOT READY. A backend that its
  readiness signals say serves nothing has no latency now; what its latency source still
  reports is a window that ends before it stopped. It shows ``n/a`` on the tick readiness says
  so, rather than its last p95 until a scrape later drops it (the detail's plot keeps it).
- ``—/2500``: a drained or down backend, which takes no requests.

The header says the unit (``P95/SLO ms``), so numbers are ms digits, never seconds. The column
is ``WIDTH`` cells when the table has room, ``MIN_WIDTH`` on a narrow terminal; a text wider
than its cell writes the values from 10 s up in thousands (``7590/14k·45s``) rather than drop
the age or the SLO. Pure: strings only.
"""

from __future__ import annotations

from gpucon.widgets.fmt import NA

WIDTH = 14  # "!112000/14000", "1840/14000·45s" whole
MIN_WIDTH = 13  # "1840/2500·45s" whole; a stale "7590/14000·30s" as "7590/14k·30s"
ABSENT = "—"


def ms_digits(value: float, compact: bool = False) -> str:
    """``14``, ``2500``, ``4.2``; with ``compact``, ``12k`` from 10,000 ms up (``3M`` from
    999,500: a p95 of minutes, a request that timed out, still fits)."""
    if compact and value >= 999_500:
        return f"{value / 1_000_000:.0f}M"
    if compact and value >= 10_000:
        return f"{value / 1000:.0f}k"
    return f"{value:.0f}" if value >= 10 else f"{value:.1f}"


def p95_text(
    p95: float | str | None,
    slo: float | None,
    width: int = WIDTH,
    *,
    glyph: str = "",
    age: str | None = None,
) -> str:
    """``{glyph}{p95}/{slo}`` and ``·{age}`` when stale; ``p95`` None is ``n/a``, a str is
    shown as it is (``—``). Compacted (``12k``) only when the full text is wider than ``width``."""
    suffix = f"·{age}" if age else ""
    text = ""
    for compact in (False, True):
        head = p95 if isinstance(p95, str) else NA if p95 is None else ms_digits(p95, compact)
        tail = NA if slo is None else ms_digits(slo, compact)
        text = f"{glyph}{head}/{tail}{suffix}"
        if len(text) <= width:
            break
    return text
