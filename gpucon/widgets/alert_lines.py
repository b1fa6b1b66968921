"""An alert as the alerts panel draws it: one line, or a few when the panel has lines to spare.

``CRIT  12s redis  <message>``: severity, how long it has been on, the target, what is wrong.
A message wider than the panel is cut at its edge, which can hide the part that says how long
or why (a source's error). While the panel has more lines than alerts, a cut message goes on
under itself, indented to where the message starts, broken between words; the last line it
may take is cut with an ellipsis as before. Pure: rich Texts, no widget.
"""

from __future__ import annotations

from rich.cells import get_character_cell_size
from rich.text import Text

from gpucon.model.alert_base import Alert, Severity
from gpucon.widgets import fmt
from gpucon.widgets.safe_text import safe

_SEVERITY_LABEL = {Severity.CRITICAL: "CRIT", Severity.WARNING: "WARN", Severity.INFO: "INFO"}
MESSAGE_CHARS = 400  # a message is never longer than this on screen, however many lines
MAX_LINES = 3  # one alert takes no more lines than this, so the next ones stay near the top
MIN_MESSAGE_CELLS = 16  # narrower than this beside the prefix: not worth a second line


def alert_head(alert: Alert, now: float, style: str) -> Text:
    """``CRIT  12s redis  ``: what leads the alert's first line."""
    head = Text(no_wrap=True, overflow="ellipsis")
    head.append(f"{_SEVERITY_LABEL[alert.severity]} ", style=style)
    head.append(f"{fmt.since(max(0.0, now - alert.since)):>4} ", style="dim")
    head.append_text(safe(alert.target, 40, "bold"))
    head.append("  ")
    return head


def alert_line(alert: Alert, now: float, style: str) -> Text:
    """The alert on one line (the terminal cuts it at the panel's edge)."""
    line = alert_head(alert, now, style)
    line.append_text(safe(alert.message, 120))
    return line


def alert_lines(alert: Alert, now: float, style: str, width: int, lines: int) -> list[Text]:
    """The alert in at most ``lines`` lines of ``width`` cells: one when it fits (or when only
    one may be used), else its message broken between words under itself."""
    head = alert_head(alert, now, style)
    message = safe(alert.message, MESSAGE_CHARS)
    indent = head.cell_len
    room = width - indent
    if lines <= 1 or indent + message.cell_len <= width or room < MIN_MESSAGE_CELLS:
        return [alert_line(alert, now, style)]
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
