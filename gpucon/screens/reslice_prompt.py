"""The re-slice key's first question: which layout? Then the plan screen (tier 3) shows the
dry run and asks for the GPU's name to be typed before anything changes.

The prompt shows the GPU, its layout now and the profiles its table offers, and takes a layout
as the command line does (``3g.40gb+2g.20gb+2x1g.10gb``, ``4g.40gb@0+1g.10gb@6``). Enter plans it
(the layout is checked there: a wrong one comes back as the plan's failed precondition or as
a message naming the item); Escape cancels.
"""

from __future__ import annotations

from typing import ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Input, Static

from gpucon.widgets.safe_text import clean


class ReslicePrompt(ModalScreen[str | None]):
    """Asks for the new layout of ``gpu``; dismisses with it, or None when cancelled."""

    DEFAULT_CSS = """
    ReslicePrompt { align: center middle; }
    ReslicePrompt #reslice-box {
        width: 90%; max-width: 100; height: auto;
        border: thick $error; background: $surface; padding: 0 1;
    }
    ReslicePrompt #reslice-layout { margin: 1 0 0 0; }
    """
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "cancel", "Cancel", id="cancel_reslice"),
    ]

    def __init__(self, gpu: str, now: str, offered: str) -> None:
        super().__init__()
        self.gpu = gpu
        self.now = now
        self.offered = offered

    def compose(self) -> ComposeResult:
        text = Text()
        text.append("Re-slice ", style="bold")
        text.append(clean(self.gpu), style="bold red")
        text.append(" (tier 3: a dry run comes first, then you type its name)\n")
        text.append(f"now: {clean(self.now)}\n")
        text.append(f"profiles: {clean(self.offered)}")
        with Vertical(id="reslice-box"):
            yield Static(text, id="reslice-about")
            yield Input(
                placeholder="new layout, e.g. 3g.40gb+2g.20gb+2x1g.10gb (Enter plans, Esc cancels)",
                id="reslice-layout",
            )

    def on_mount(self) -> None:
        self.query_one("#reslice-layout", Input).focus()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        self.dismiss(event.value.strip() or None)

    def action_cancel(self) -> None:
        self.dismiss(None)
