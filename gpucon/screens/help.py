"""The `?` screen: what each slot-table column means, then every key that works where you are
(after remapping) and what it does."""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static

INTRO = (
    "gpucon shows every MIG slice, whole GPU and VM with its backend. Activity names its metric "
    "in the detail; n/a means no source reports the value (never 0 %). Stale rows are dimmed "
    "italic; the status bar shows each source's health and age."
)


# (column title, what it means); TREND's span and REQ/S's window are filled in when known
COLUMN_HELP: tuple[tuple[str, str], ...] = (
    ("HOST GPU SLOT", "where: host, GPU index and card, MIG instance (giN), whole, or VM"),
    ("PROFILE", "MIG profile (3g.40gb), or the card's model for a whole GPU or VM"),
    (
        "ACT%",
        "how busy the slot's compute is, 0-100 %; the metric is named in the detail "
        "(DCGM_FI_PROF_GR_ENGINE_ACTIVE, NVML GPM or utilization). ! = hot (90 % or more)",
    ),
    ("TREND", "ACT% over {trend}, oldest left, newest right"),
    ("MEM GiB", "memory used/total in GiB; ! = less than 1.5 GiB free"),
    ("BACKEND", "the inference server on the slot (one model on one server)"),
    ("WT", "scheduler weight: its share of new work is weight / in-flight (0 = none)"),
    (
        "STATE",
        "registry state: active, draining, drained, down. NOT READY: it should take work and "
        "its readiness signals say it cannot (a fresh check wins over a stale registry); "
        "drained ✗: drained and not ready either (fix it before undraining); "
        "active?: no signal vouches for it",
    ),
    ("INFL", "requests in flight on the backend now (kept by the scheduler)"),
    (
        "P95/SLO ms",
        "95th-percentile latency over its SLO, both in ms; ! = over the SLO, ~ = within 20 % "
        "of it; 1840/2500·45s = stale, the last p95 seen 45 s ago; n/a/2500 = no p95 now "
        "(none reported, or NOT READY); —/2500 = drained or down. Sorts by p95 / SLO",
    ),
    ("REQ/S", "requests per second, a rate over {window}"),
)


def column_help(trend_span: str = "", rate_window: str = "") -> Text:
    """What each column means; ``trend_span``/``rate_window`` as this console runs them."""
    text = Text()
    text.append("Columns\n", style="bold underline")
    for title, meaning in COLUMN_HELP:
        shown = meaning.format(
            trend=trend_span or "the last samples (one per refresh)",
            window=rate_window or "the window its title names",
        )
        text.append(f"{title:<14}", style="bold")
        text.append(f"{shown}\n")
    text.append(
        "Rows: problems first (a warning or critical alert on the slot, backend or GPU), then "
        "host, GPU, slot; s/S sorts by a column. z pauses: order and values held.\n"
    )
    return text


def help_text(
    keys: Sequence[tuple[str, str, str]], mode_note: str, columns: Text | None = None
) -> Text:
    """The columns' meanings, then a table of (key, binding id, description) rows."""
    text = Text()
    text.append("gpucon: what you see, and the keys\n\n", style="bold")
    text.append(INTRO + "\n\n")
    if mode_note:
        text.append(mode_note + "\n\n", style="bold")
    if columns is not None:
        text.append_text(columns)
        text.append("\n")
    text.append("Keys\n", style="bold underline")
    text.append(f"{'KEY':<14}{'ID (config [keys])':<22}WHAT\n", style="bold")
    for key, binding_id, description in keys:
        text.append(f"{key:<14}", style="bold")
        text.append(f"{binding_id:<22}", style="dim")
        text.append(f"{description}\n")
    text.append('\nRemap any key in the config: [keys] filter = "f"   (Esc closes)', "dim")
    return text


class HelpScreen(ModalScreen[None]):
    # here, not in gpucon.tcss: parsed when the screen is first shown, not before the first frame
    DEFAULT_CSS = """
    HelpScreen {
        align: center middle;
    }
    HelpScreen #help-box {
        width: 90%;
        max-width: 110;
        height: auto;
        max-height: 90%;
        border: thick $primary;
        background: $surface;
        padding: 1 2;
    }
    """

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape,q,question_mark", "app.pop_screen", "Close", id="close_help"),
    ]

    def __init__(
        self,
        keys: Sequence[tuple[str, str, str]],
        mode_note: str = "",
        columns: Text | None = None,
    ) -> None:
        super().__init__()
        self.keys = tuple(keys)
        self.mode_note = mode_note
        self.columns = columns

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="help-box"):
            yield Static(help_text(self.keys, self.mode_note, self.columns), id="help-text")
