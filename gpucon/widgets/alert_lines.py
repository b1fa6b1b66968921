"""An alert as the alerts panel draws it: one line, or a few when the panel has lines to spare.

``CRIT  12s redis  <message>``: severity, how long it has been on, the target, what is wrong.
An alert this console has had since it began watching (``watched_from``: its sources' first
read) and that no source dated earlier is only as old as the console's view, so its age reads
``≥12s``: at least that long (it may have begun long before the console started).
A message wider than the panel is cut at its edge, which can hide the part that says how long
or why (a source's error). While the panel has more lines than alerts, a cut message goes on
under itself, indented to where the message starts, broken between words; the last line it
may take is cut with an ellipsis as before. Pure: rich Texts, no widget.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.cells import get_character_cell_size
from rich.text import Text

from gpucon.model.alert_base import Alert, Severity
from gpucon.widgets import fmt
from gpucon.widgets.safe_text import safe

if TYPE_CHECKING:
    from gpucon.model.snapshot import Snapshot

_SEVERITY_LABEL = {Severity.CRITICAL: "CRIT", Severity.WARNING: "WARN", Severity.INFO: "INFO"}
MESSAGE_CHARS = 400  # a message is never longer than this on screen, however many lines
MAX_LINES = 3  # one alert takes no more lines than this, so the next ones stay near the top
MIN_MESSAGE_CELLS = 16  # narrower than this beside the prefix: not worth a second line
# an alert raised this soon after the console began watching was there before it looked
FIRST_LOOK_S = 5.0


def watched_from(snapshot: Snapshot) -> float | None:
    """When this console began watching: the first time its hub asked any source."""
    return min((s.started_at for s in snapshot.sources.values() if s.started_at), default=None)


def age_text(alert: Alert, now: float, watched: float | None = None) -> str:
    """``12s``, or ``≥12s`` for an alert there when the console first looked that no source
    dated; ``n/a`` while that is under 2 s (nothing is known of its age yet)."""
    age = max(0.0, now - alert.since)
    shown = fmt.since(age)
    if watched is None or not watched <= alert.since <= watched + FIRST_LOOK_S:
        return shown
    return f"≥{shown}" if age >= 2 else fmt.NA


def alert_head(alert: Alert, now: float, style: str, watched: float | None = None) -> Text:
    """``CRIT  12s redis  ``: what leads the alert's first line."""
    head = Text(no_wrap=True, overflow="ellipsis")
    head.append(f"{_SEVERITY_LABEL[alert.severity]} ", style=style)
    head.append(f"{age_text(alert, now, watched):>4} ", style="dim")
    head.append_text(safe(alert.target, 40, "bold"))
    head.append("  ")
    return head


def alert_line(alert: Alert, now: float, style: str, watched: float | None = None) -> Text:
    """The alert on one line (the terminal cuts it at the panel's edge)."""
    line = alert_head(alert, now, style, watched)
    line.append_text(safe(alert.message, 120))
    return line


def alert_lines(
    alert: Alert, now: float, style: str, width: int, lines: int, watched: float | None = None
) -> list[Text]:
    """The alert in at most ``lines`` lines of ``width`` cells: one when it fits (or when only
    one may be used), else its message broken between words under itself."""
    head = alert_head(alert, now, style, watched)
    message = safe(alert.message, MESSAGE_CHARS)
    indent = head.cell_len
    room = width - indent
    if lines <= 1 or indent + message.cell_len <= width or room < MIN_MESSAGE_CELLS:
        return [alert_line(alert, now, style, watched)]
    out: list[Text] = []
    rest = message
    while rest.plain and len(out) < lines:
        last = len(out) == lines - 1
        cut = len(rest.plain) if last else _break_at(rest.plain, room)
        part, rest = rest[:cut], rest[cut:]
        part.rstrip()
        rest = rest[len(rest.plain) - len(rest.plain.lstrip(" ")) :]  # no line starts blank
        line = Text(no_wrap=True, overflow="ellipsis")
        line.append_text(head if not out else Text(" " * indent))
        line.append_text(part)
        out.append(line)
    return out


def _break_at(plain: str, room: int) -> int:
    """How many characters of ``plain`` go on a line of ``room`` cells: up to the last space
    that fits (a word longer than the line is cut where the line ends)."""
    cells = end = 0
    for char in plain:
        cells += get_character_cell_size(char)
        if cells > room:
            break
        end += 1
    else:
        return len(plain)
    space = plain.rfind(" ", 0, end + 1)
    return space + 1 if space > 0 else max(1, end)


def fit_lines(alerts: list[Alert], now: float, width: int, room: int) -> list[int]:
    """How many lines each alert gets in ``room`` lines: one each, and the lines to spare to
    the first alerts whose message is cut, up to ``MAX_LINES`` each (nothing to spare while
    the alerts alone fill the room: then each keeps one line)."""
    counts = [1] * len(alerts)
    spare = room - len(alerts)
    for i, alert in enumerate(alerts):
        if spare <= 0:
            break
        want = len(alert_lines(alert, now, "", width, MAX_LINES)) - 1
        counts[i] += min(want, spare)
        spare -= counts[i] - 1
    return counts
