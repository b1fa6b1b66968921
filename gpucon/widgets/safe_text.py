"""Untrusted text from the fleet, made safe to show: no markup, no control codes, fixed width.

Names, labels and error texts come from hosts, Redis, Prometheus and Kubernetes; any of them
may hold Rich markup (``[bold red]``), terminal escapes (``\\x1b[31m``, OSC titles), bidi
overrides or very wide (CJK, emoji) characters. ``clean`` removes what a terminal would act
on, ``fit`` truncates by terminal cells, ``safe`` returns a ``rich.text.Text`` (never markup).
"""

from __future__ import annotations

import functools
import re

from rich.cells import cell_len, set_cell_size
from rich.style import Style
from rich.text import Text

ELLIPSIS = "…"

# ESC sequences first (CSI, OSC up to BEL/ST, two-byte escapes), then any C0/C1 control left,
# then the bidi embedding/override/isolate characters that reorder what the eye sees.
_ESCAPES = (
    r"\x1b\[[0-?]*[ -/]*[@-~]?"  # CSI
    r"|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)?"  # OSC
    r"|\x1b[P^_X][^\x1b]*(?:\x1b\\)?"  # DCS, PM, APC, SOS
    r"|\x1b.?"  # any other escape
    r"|\x9b[0-?]*[ -/]*[@-~]?"  # 8-bit CSI
)
_CONTROLS = r"[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]"


@functools.cache
def _patterns() -> tuple[re.Pattern[str], re.Pattern[str]]:
    """The escape and control-character patterns, compiled on first need (most text is plain
    ASCII and never needs them: not compiling them at import saves the console's start-up)."""
    return re.compile(_ESCAPES), re.compile(_CONTROLS)


def clean(value: object) -> str:
    """``value`` as one line of plain text: escapes and control characters removed.

    Tabs and newlines become spaces so that a name can never break a row in two.
    """
    text = value if isinstance(value, str) else str(value)
    if text.isascii() and text.isprintable():
        return text  # the common case, decided without regexes
    text = text.replace("\t", " ").replace("\n", " ").replace("\r", " ")
    escapes, controls = _patterns()
    return controls.sub("", escapes.sub("", text))


def fit(text: str, width: int) -> str:
    """``text`` cut to at most ``width`` terminal cells, ending in "…" when cut."""
    if width <= 0:
        return ""
    if len(text) <= width and (text.isascii() or cell_len(text) <= width):
        return text
    if cell_len(text) <= width:
        return text
    cut = set_cell_size(text, width - 1).rstrip(" ")
    while cell_len(cut) > width - 1:  # a wide character at the edge
        cut = cut[:-1]
    return cut + ELLIPSIS


def fit_end(text: str, width: int) -> str:
    """``text`` cut to at most ``width`` cells keeping its end, starting with "…" when cut:
    ids that share a prefix (``lab/gpu0/gi1``, ``lab/gpu0/gi2``) differ at the end."""
    if width <= 0:
        return ""
    if len(text) <= width and (text.isascii() or cell_len(text) <= width):
        return text
    if cell_len(text) <= width:
        return text
    tail = text[len(text) - (width - 1) :] if text.isascii() else text
    while cell_len(tail) > width - 1:
        tail = tail[1:]
    return ELLIPSIS + tail


def pad(text: str, width: int, right: bool = False) -> str:
    """``text`` fitted and padded to exactly ``width`` cells (right-aligned if asked)."""
    text = fit(text, width)
    gap = width - (len(text) if text.isascii() else cell_len(text))
    return (" " * gap + text) if right else (text + " " * gap)


def safe(value: object, width: int | None = None, style: str | Style = "") -> Text:
    """Untrusted ``value`` as a Text that renders literally (no markup), fitted to ``width``."""
    text = clean(value)
    if width is not None:
        text = fit(text, width)
    return Text(text, style=style, no_wrap=True, overflow="ellipsis")
