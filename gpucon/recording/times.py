"""Times a person gives on the command line (``--at``), read against a recording's span.

Accepted: epoch seconds (``1796144138.6``); an offset from the recording's start (``+90``,
``+1:30``, ``+0:01:30``); a local time of day (``02:14`` or ``02:14:05``: on the recording's
first day, or the next day when that falls in the recording); a local date and time
(``2026-12-01 02:14:05`` or ISO 8601 with ``T``, a zone if given). Pure.
"""

from __future__ import annotations

import datetime as dt


class TimeError(ValueError):
    """A time that cannot be read; the message says what is accepted."""


ACCEPTED = (
    "epoch seconds, +SECONDS or +[H:]MM:SS from the start, HH:MM[:SS] local, "
    "or YYYY-MM-DD HH:MM[:SS]"
)


def _clock_seconds(text: str) -> float:
    parts = text.split(":")
    if not 1 <= len(parts) <= 3:
        raise TimeError(f"expected {ACCEPTED}, got {text!r}")
    try:
        values = [float(p) for p in parts]
    except ValueError:
        raise TimeError(f"expected {ACCEPTED}, got {text!r}") from None
    seconds = 0.0
    for v in values:
        if v < 0:
            raise TimeError(f"expected {ACCEPTED}, got {text!r}")
        seconds = seconds * 60 + v
    return seconds


def parse_time(text: str, span: tuple[float, float]) -> float:
    """The epoch time ``text`` names, within or near the recording ``span``."""
    text = text.strip()
    if not text:
        raise TimeError(f"expected {ACCEPTED}, got nothing")
    if text.startswith("+"):
        return span[0] + _clock_seconds(text[1:])
    try:
        value = float(text)
    except ValueError:
        pass
    else:
        if value != value or value in (float("inf"), float("-inf")):
            raise TimeError(f"expected {ACCEPTED}, got {text!r}")
        return value
    if ":" in text and "-" not in text:
        day = dt.datetime.fromtimestamp(span[0]).replace(hour=0, minute=0, second=0, microsecond=0)
        # a time of day is HH:MM or HH:MM:SS (an offset's two parts are minutes:seconds)
        at = day.timestamp() + _clock_seconds(text if text.count(":") == 2 else text + ":00")
        if at < span[0] - 1 and at + 86_400 <= span[1] + 1:
            at += 86_400  # a recording across midnight: the time on its second day
        return at
    try:
        when = dt.datetime.fromisoformat(text)
    except ValueError:
        raise TimeError(f"expected {ACCEPTED}, got {text!r}") from None
    return when.timestamp()
