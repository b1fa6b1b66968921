"""The fleet screen's bottom panels: the queues and the alerts, and the bottom's layout.

Each panel builds a ``rich.text.Text`` from the snapshot (untrusted names through
``safe_text``) and repaints only the cells of it that changed (``text_panel``). Mounted
after the first frame, and imported then (``FleetScreen._mount_panels``).
"""

from __future__ import annotations

from typing import ClassVar

from rich.text import Text
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.message import Message

from gpucon.model.alerts import Alert, Severity
from gpucon.model.queue_stall import QUEUE_SOURCE
from gpucon.model.queue_wait import oldest_wait
from gpucon.model.snapshot import Snapshot
from gpucon.widgets import fmt
from gpucon.widgets.alert_lines import alert_lines, fit_lines, watched_from
from gpucon.widgets.safe_text import safe
from gpucon.widgets.text_panel import TextPanel
from gpucon.widgets.tick_prep import alert_counts


class BottomLeft(Vertical):
    """The bottom's left column: the queues over the GPUs and nodes.

    Its class carries the layout of all the bottom's panels (the alerts beside it too): they
    are mounted together after the first frame (``FleetScreen._mount_panels``), so these
    rules are parsed then, not before the first frame with ``gpucon.tcss`` (and this module
    is imported then too). Unscoped: they name the panels by id. (Default CSS, below the
    app's own: ``noc.tcss`` overrides them.)
    """

    SCOPED_CSS = False
    DEFAULT_CSS = """
    /* the queues, and under them the GPUs and nodes; the alerts keep the rest of the width */
    #bottom-left {
        width: 64;
        height: 100%;
        border-right: solid $panel;
    }
    #queues {
        height: auto;
        max-height: 5;
        padding: 0 1;
    }
    #health {
        height: 1fr;
        padding: 0 1;
        border-top: solid $panel;
    }
    /* no GPU source: one line under the queues, not an empty panel */
    #health.-empty { height: 2; }
    #alerts {
        width: 1fr;
        height: 1fr;
        padding: 0 1;
    }
    #alerts:focus {
        background: $boost;
    }
    /* narrow: the alerts take the bottom's whole width, the queues one line under them */
    FleetScreen.-narrow #bottom-left {
        dock: bottom;
        width: 100%;
        height: 1;
        border-right: none;
    }
    FleetScreen.-narrow #queues { max-height: 1; }
    FleetScreen.-narrow #health { display: none; }
    """


class QueuePanel(TextPanel):
    """Each request queue: requests waiting (lag + pending) with their trend, consumer lag,
    pending, the oldest waiting entry's age, and the stream's length (XLEN, acked entries
    included until the stream is trimmed)."""

    # one line for all queues (a narrow terminal gives the alerts the room)
    compact = False

    def show_snapshot(self, snapshot: Snapshot) -> None:
        if self.compact:
            self.show_text(compact_queues(snapshot))
            return
        text = Text(no_wrap=True, overflow="ellipsis")
        text.append("QUEUE           WAIT   LAG  PEND  OLDEST    LEN  TREND\n", style="bold")
        if not snapshot.queues:
            text.append(_no_queues(snapshot, "no queues reported"), style="dim")
        colour = self.app.theme_variables.get("stale")
        stale = f"{colour} italic" if colour else "dim italic"
        for stream, q in sorted(snapshot.queues.items()):
            spark = fmt.sparkline(snapshot.history.tail(f"queue:{stream}:waiting", 12), 12)
            age = snapshot.staleness.oldest(f"queue:{stream}")
            line = Text(no_wrap=True)
            line.append(safe(stream, 14))
            line.pad_right(14 - line.cell_len)
            line.append(
                f" {fmt.count(q.waiting):>5} {fmt.count(q.lag):>5} {fmt.count(q.pending):>5}"
            )
            oldest = fmt.oldest_wait(oldest_wait(q, snapshot.staleness))
            line.append(f" {oldest:>7} {fmt.count(q.length):>6}  ")
            if age is None:
                line.append(spark, style=self.theme_style("primary"))
            else:  # every number here came from a stale read: none of them is current
                line.append(f"stale {fmt.age(age)}".ljust(12), style="bold")
                line.stylize(stale)
            text.append_text(line)
            text.append("\n")
        text.rstrip()  # no blank last line: the panel's height follows its queues
        self.show_text(text)


def _no_queues(snapshot: Snapshot, none: str) -> str:
    """Why no queue is shown: none there, or none known (the queue's source has never read:
    "no queues reported" read as an empty fleet while Redis was down)."""
    status = snapshot.sources.get(QUEUE_SOURCE)
    if status is None or status.last_ok_at is not None:
        return none
    return f"queues unknown: {QUEUE_SOURCE} never read ({status.health.value})"


def compact_queues(snapshot: Snapshot) -> Text:
    """Every queue on one line: name, requests waiting, oldest entry's age."""
    text = Text(no_wrap=True, overflow="ellipsis")
    text.append("QUEUE ", style="bold")
    if not snapshot.queues:
        text.append(_no_queues(snapshot, "none reported"), style="dim")
    for i, (stream, q) in enumerate(sorted(snapshot.queues.items())):
        if i:
            text.append(" │ ", style="dim")
        text.append_text(safe(stream, 20))
        stale = snapshot.staleness.oldest(f"queue:{stream}")
        oldest = fmt.oldest_wait(oldest_wait(q, snapshot.staleness))
        text.append(f" wait {fmt.count(q.waiting)} oldest {oldest}")
        if stale is not None:
            text.append(f" stale {fmt.age(stale)}", style="bold")
    return text


class AlertsPanel(TextPanel, can_focus=True):
    """Active alerts in the order the snapshot gives them, one line each (a few for a long
    message while the panel has lines to spare: ``alert_lines``).

    Focusable (Tab, or ``!`` on the fleet screen): up/down move a highlight, Enter (or ``g``)
    asks the screen to jump to the highlighted alert's row (``AlertsPanel.Jump``).
    """

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("up,k", "move(-1)", "Up", show=False, id="alert_up"),
        Binding("down,j", "move(1)", "Down", show=False, id="alert_down"),
        Binding("enter", "jump", "Go to row", id="alert_jump"),
    ]

    class Jump(Message):
        """Go to the row of this alert's target."""

        def __init__(self, alert: Alert) -> None:
            super().__init__()
            self.alert = alert

    snapshot: Snapshot | None = None
    cursor = 0
    # a NOC wall's alerts page: no "… and N more" cut at 6; the panel is the screen
    title = "ALERTS"

    @property
    def selected(self) -> Alert | None:
        alerts = self.snapshot.alerts if self.snapshot is not None else ()
        return alerts[min(self.cursor, len(alerts) - 1)] if alerts else None

    # the chosen alert's key: the highlight stays on it when alerts come, go or reorder
    chosen: str | None = None

    def action_move(self, step: int) -> None:
        if self.snapshot is None or not self.snapshot.alerts:
            return
        self.cursor = max(0, min(self.cursor + step, len(self.snapshot.alerts) - 1))
        self.chosen = self.snapshot.alerts[self.cursor].key
        self.show_snapshot(self.snapshot)

    def action_jump(self) -> None:
        alert = self.selected
        if alert is not None:
            self.post_message(self.Jump(alert))

    def on_focus(self) -> None:
        if self.snapshot is not None:
            self.show_snapshot(self.snapshot)

    def on_blur(self) -> None:
        if self.snapshot is not None:
            self.show_snapshot(self.snapshot)

    def show_snapshot(self, snapshot: Snapshot) -> None:
        self.snapshot = snapshot
        alerts = snapshot.alerts
        if self.chosen is not None:
            self.cursor = next(
                (i for i, a in enumerate(alerts) if a.key == self.chosen), self.cursor
            )
        self.cursor = max(0, min(self.cursor, len(alerts) - 1))
        text = Text(no_wrap=True, overflow="ellipsis")
        crit, warn = alert_counts(alerts)
        text.append(f"{self.title} ({len(alerts)}: {crit} crit, {warn} warn)", style="bold")
        if self.has_focus:
            text.append("  ↑↓ choose · Enter go to its row", style="dim")
        text.append("\n")
        if not alerts:
            text.append("all clear", style="dim")
        styles = {
            Severity.CRITICAL: self.theme_style("latency-breach"),
            Severity.WARNING: self.theme_style("util-hot"),
            Severity.INFO: "dim",
        }
        # only what fits is built: a fleet in trouble can have thousands of alerts
        room = max(1, (self.size.height or 24) - 1)
        more = len(alerts) > room
        if more:
            room -= 1
        top = max(0, self.cursor - room + 1) if self.has_focus else 0
        shown = alerts[top : top + room]
        width = max(20, self.size.width - 2)
        now = snapshot.taken_at
        watched = watched_from(snapshot)
        # all alerts shown and lines to spare: a message cut at the edge goes on below
        counts = [1] * len(shown) if more else fit_lines(list(shown), now, width, room)
        for i, (alert, count) in enumerate(zip(shown, counts, strict=True), top):
            for line in alert_lines(alert, now, styles[alert.severity], width, count, watched):
                if self.has_focus and i == self.cursor:
                    line.stylize("reverse")
                    line.pad_right(width - line.cell_len)
                text.append_text(line)
                text.append("\n")
        if more:
            rest = len(alerts) - top - len(shown)
            text.append(f"… {rest} more below, {top} above" if top else f"… and {rest} more")
            text.stylize("dim", len(text) - len(text.plain.rsplit("\n", 1)[-1]))
        else:
            text.rstrip()
        self.show_text(text)

    def on_resize(self) -> None:
        if self.snapshot is not None:
            self.show_snapshot(self.snapshot)
