"""The status bar (the NOC wall's header): mode badges, the clock and page, alert counts, each
source's health and age, the fleet's name and counts — fitted to the terminal's width.

What does not fit is shortened or left out least important first, whole words at a time, so
the bar is never cut in the middle of a word (``448 backe…``): the product name goes first,
then the fleet's counts (``backends``, then ``slots``, then ``GPUs``), the page's subtitle
(``problems first``), healthy sources' ages, the fleet's name, the healthy sources' names
(``+3 ok``), the READ-ONLY badge beside NOC (a wall is always read-only) and last the word
``page`` (``1/3``). A source that is down or stale is always named with its age, and the alert
counts, the mode badge, the clock and the page number always stay.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from rich.text import Text
from textual import events

from gpucon.model.fleet import Health, SourceStatus
from gpucon.model.queue_stall import QUEUE_SOURCE
from gpucon.model.snapshot import Snapshot
from gpucon.widgets import fmt
from gpucon.widgets.safe_text import clean, fit, safe
from gpucon.widgets.text_panel import TextPanel
from gpucon.widgets.tick_prep import alert_counts, slot_count

if TYPE_CHECKING:
    from gpucon.recording.status import RecordingStatus

# the status bar lists the sources worst first: what is broken is read first
_WORST_FIRST = {Health.DOWN: 0, Health.DEGRADED: 1, Health.OK: 2}

# how far a header is squeezed: each level leaves out or shortens one more thing, least
# important first (``StatusBar.header``)
NO_PRODUCT = 1
COUNTS_FROM = 2  # from this level one count fewer a level: backends, slots, GPUs
SHORT_PAGE, NO_HEALTHY_AGES, NO_FLEET_NAME, HEALTHY_COUNTED = 5, 6, 7, 8
NOC_IMPLIES_READ_ONLY, PAGE_NUMBER_ONLY = 9, 10
LEVELS = 11


def source_badges(
    snapshot: Snapshot,
    styles: dict[Health, str],
    healthy_ages: bool = True,
    healthy_named: bool = True,
) -> Text:
    """Each source with its health and the age of its last good read, a DOWN or STALE one
    first (then by name). Squeezed: healthy sources without their ages, or counted (``+3
    ok``) instead of named; a broken source is always named with its age."""
    text = Text()
    ordered = sorted(
        snapshot.sources.items(), key=lambda item: (_WORST_FIRST[item[1].health], item[0])
    )
    healthy = 0
    for name, status in ordered:
        never_read = status.last_read_s is None and status.last_ok_at is None
        waiting = status.health is Health.DOWN and never_read  # first read not finished
        if status.health is Health.OK and not healthy_named:
            healthy += 1
            continue
        text.append(f" {fit(clean(name), 16)} ", style="bold")
        if waiting:
            text.append("waiting │", style="dim italic")
            continue
        state = _state_word(status, snapshot.taken_at)
        text.append(state if status.health is Health.OK else f" {state} ", styles[status.health])
        age = status.age_s(snapshot.taken_at)
        if status.health is not Health.OK or healthy_ages:
            # the one age format (``DOWN 5s`` beside ``·5s`` and an alert's ``5s``), so the
            # bar, the stale values and the alerts it explains never read as other outages
            text.append(f" {'never read' if age is None else fmt.since(age)}", style="dim")
        text.append(" │")
    if healthy:
        text.append(f" +{healthy} ok", style=styles[Health.OK])
        text.append(" │")
    return text


def _state_word(status: SourceStatus, now: float) -> str:
    """``ok``, ``DOWN``, ``STALE`` (its values are older than two cadences), or ``ERR``: it read
    with errors and its values are fresh (``redis STALE <2s`` said two contradicting things;
    the error is the ``source_errors`` alert's)."""
    if status.health is Health.OK:
        return "ok"
    if status.health is Health.DOWN:
        return "DOWN"
    age = status.age_s(now)
    after = status.stale_after_s
    return "ERR" if age is not None and after is not None and age <= after else "STALE"


class StatusBar(TextPanel):
    """Mode badges, fleet counts, alert counts, each source's health and age; a clock in NOC."""

    def __init__(
        self,
        badges: Sequence[str],
        *,
        fleet_name: str = "",
        clock: Callable[[], float] = time.time,
        show_clock: bool = False,
        recording: Callable[[], RecordingStatus] | None = None,
        id: str | None = None,
    ) -> None:
        super().__init__(id=id)
        self.badges = tuple(badges)
        # ``--record``: the recording's state, read at each redraw (the REC badge)
        self.recording = recording
        self.fleet_name = fleet_name
        self.clock = clock
        self.show_clock = show_clock
        self.snapshot: Snapshot | None = None
        # "page 2/5 problems first" on a NOC wall: which page of how many is up
        self.page_label = ""

    def set_page_label(self, label: str) -> None:
        if label != self.page_label:
            self.page_label = label
            self.redraw()

    def on_mount(self) -> None:
        if self.show_clock:
            self.set_interval(1.0, self.redraw)
        self.redraw()

    def on_resize(self, event: events.Resize) -> None:
        self.redraw()

    def show_snapshot(self, snapshot: Snapshot) -> None:
        self.snapshot = snapshot
        self.redraw()

    def _rec_badge(self, status: RecordingStatus) -> Text:
        """REC, the file and its size; behind or failed said in the alert colours."""
        styles = {
            "ok": "bold " + self.theme_style("latency-breach"),
            "behind": "reverse bold " + self.theme_style("util-hot"),
            "failed": "reverse bold " + self.theme_style("latency-breach"),
        }
        # a failure says why, so it may take a little more of the bar
        badge = safe(status.badge(), 64 if status.state == "failed" else 48, styles[status.state])
        badge.append("  ")
        return badge

    def redraw(self) -> None:
        width = self.size.width
        text = self.header(0)
        level = 1
        while width and text.cell_len > width and level < LEVELS:
            text = self.header(level)
            level += 1
        if width and text.cell_len > width:
            text = cut_at_word(text, width)
        self.show_text(text)

    def header(self, level: int) -> Text:
        """The bar's text squeezed to ``level`` (0: all of it; see the module's order)."""
        text = Text(no_wrap=True, overflow="ellipsis")
        for badge in self.badges:
            if level >= NOC_IMPLIES_READ_ONLY and badge == "READ-ONLY" and "NOC" in self.badges:
                continue
            text.append(f" {badge} ", style="reverse bold")
            text.append(" ")
        if self.recording is not None:
            text.append_text(self._rec_badge(self.recording()))
        if self.show_clock:
            text.append(time.strftime("%H:%M:%S", time.localtime(self.clock())) + " ", "bold")
        if self.page_label:
            words = self.page_label.split()
            label = " ".join(words[:2]) if level >= SHORT_PAGE else self.page_label
            if level >= PAGE_NUMBER_ONLY and words[0] == "page":
                label = words[1]
            text.append(f" {label} ", style="reverse bold")
            text.append(" ")
        snap = self.snapshot
        if snap is None:
            text.append("gpucon", style="bold")
            text.append("  waiting for the first snapshot…", style="dim")
            return text
        # alert counts and each source's health before the fleet's name and counts
        crit, warn = alert_counts(snap.alerts)
        text.append(f" {crit} crit ", style=self.theme_style("latency-breach") if crit else "dim")
        text.append(f" {warn} warn ", style=self.theme_style("util-hot") if warn else "dim")
        text.append(" │")
        health_styles = {
            Health.OK: self.theme_style("success"),
            Health.DEGRADED: "reverse " + self.theme_style("util-hot"),
            Health.DOWN: "reverse " + self.theme_style("latency-breach"),
        }
        text.append_text(
            source_badges(
                snap,
                health_styles,
                healthy_ages=level < NO_HEALTHY_AGES,
                healthy_named=level < HEALTHY_COUNTED,
            )
        )
        if level < NO_PRODUCT:
            text.append(" gpucon", style="bold")
            if self.fleet_name:
                text.append(" ·")
        if self.fleet_name and level < NO_FLEET_NAME:
            text.append(" ")
            text.append_text(safe(self.fleet_name, 20))
        counts = fleet_counts(snap)[: 3 - min(3, max(0, level - COUNTS_FROM + 1))]
        if counts:
            text.append("  " + " ".join(counts), style="dim")
        return text


def registry_never_read(snapshot: Snapshot) -> bool:
    """Whether the scheduler registry's source (``redis``) is configured and has never read:
    its backends (and the slots only they name) are not known to be none."""
    status = snapshot.sources.get(QUEUE_SOURCE)
    return status is not None and status.last_ok_at is None


def fleet_counts(snapshot: Snapshot) -> tuple[str, str, str]:
    """``0 GPUs 3 slots 3 backends``; before the registry has ever been read, ``backends
    unknown`` (and ``slots unknown`` while no other source names one), never ``0 backends``
    beside a table that says the fleet is unknown."""
    slots = slot_count(snapshot.slots, snapshot.backends)
    unread = registry_never_read(snapshot)
    return (
        f"{len(snapshot.gpus)} GPUs",
        "slots unknown" if unread and not slots else f"{slots} slots",
        "backends unknown" if unread else f"{len(snapshot.backends)} backends",
    )


def cut_at_word(text: Text, width: int) -> Text:
    """``text`` cut to ``width`` cells at the last space that fits, with ``…``: never in the
    middle of a word (the last resort, below every squeeze level)."""
    plain = text.plain
    end = plain.rfind(" ", 0, max(0, width - 1))
    cut = text[: end if end > 0 else max(0, width - 1)]
    cut.append("…")
    return cut
