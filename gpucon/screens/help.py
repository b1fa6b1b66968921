"""The `?` screen: every key that works where you are (after remapping), and what it does."""

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


def help_text(keys: Sequence[tuple[str, str, str]], mode_note: str) -> Text:
    """A table of (key, binding id, description) rows after an introduction."""
    text = Text()
    text.append("gpucon keys\n\n", style="bold")
    text.append(INTRO + "\n\n")
    if mode_note:
        text.append(mode_note + "\n\n", style="bold")
    text.append(f"{'KEY':<14}{'ID (config [keys])':<22}WHAT\n", style="bold")
    for key, binding_id, description in keys:
        text.append(f"{key:<14}", style="bold")
        text.append(f"{binding_id:<22}", style="dim")
        text.append(f"{description}\n")
    text.append('\nRemap any key in the config: [keys] filter = "f"   (Esc closes)', "dim")
    return text


class HelpScreen(ModalScreen[None]):
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape,q,question_mark", "app.pop_screen", "Close", id="close_help"),
    ]

    def __init__(self, keys: Sequence[tuple[str, str, str]], mode_note: str = "") -> None:
        super().__init__()
        self.keys = tuple(keys)
        self.mode_note = mode_note

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="help-box"):
            yield Static(help_text(self.keys, self.mode_note), id="help-text")
