"""The progress screen: each step of a running action as it happens, then the outcome.

The action runs in a thread worker (``gpucon.screens.action_runner``), which posts its steps
here as ``ActionProgress`` messages and its outcome as one ``ActionFinished``. A step that
reports updates (a drain counting down in-flight requests) replaces its own line instead of
adding one per update. The screen cannot be closed
while the action runs (the action is not cancelled by closing a window); it can afterwards.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Button, Static

from gpucon.actions.plan import Outcome, Plan, ProgressEvent, StepStatus
from gpucon.widgets.safe_text import clean

if TYPE_CHECKING:
    from gpucon.screens.action_runner import ActionFinished, ActionProgress

MARKS = {
    StepStatus.STARTED: ("…", "bold"),
    StepStatus.RUNNING: ("…", "bold yellow"),
    StepStatus.DONE: ("✓", "bold green"),
    StepStatus.FAILED: ("✗", "bold red"),
}


class ProgressScreen(ModalScreen[None]):
    DEFAULT_CSS = """
    ProgressScreen { align: center middle; }
    ProgressScreen #progress-box {
        width: 90%; max-width: 120; height: auto; max-height: 90%;
        border: thick $accent; background: $surface; padding: 0 1;
    }
    ProgressScreen #progress-steps, ProgressScreen #progress-outcome { height: auto; }
    ProgressScreen #progress-buttons { height: auto; align-horizontal: right; }
    """

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "close", "Close", id="close_progress"),
    ]

    def __init__(self, plan: Plan) -> None:
        super().__init__()
        self.plan = plan
        # step key -> (status, latest text, fraction done), in the order steps started
        self.lines: dict[str, tuple[StepStatus, str, float | None]] = {}
        self.outcome: Outcome | None = None

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="progress-box"):
            title = Text()
            title.append(f"{self.plan.action} ", style="bold")
            title.append(clean(self.plan.target), style="bold reverse")
            title.append(f"   plan {self.plan.digest}", style="dim")
            yield Static(title, id="progress-title")
            yield Static(Text("starting…", style="dim"), id="progress-steps")
            yield Static(Text(""), id="progress-outcome")
            with Horizontal(id="progress-buttons"):
                yield Button(Text("Close"), id="close", disabled=True)

    @property
    def finished(self) -> bool:
        return self.outcome is not None

    def steps_text(self) -> Text:
        text = Text()
        for key, (status, line, fraction) in self.lines.items():
            mark, style = MARKS[status]
            text.append(f" {mark} ", style=style)
            text.append(clean(key), style="bold")
            if status is StepStatus.RUNNING and fraction is not None:
                filled = round(10 * min(1.0, max(0.0, fraction)))
                text.append(f"  [{'#' * filled}{'.' * (10 - filled)}] {fraction:4.0%}", "bold")
            text.append(f"  {clean(line)}\n")
        return text

    def outcome_text(self) -> Text:
        outcome = self.outcome
        text = Text()
        if outcome is None:
            return text
        text.append(f"{outcome.status.upper()}: ", style="bold green" if outcome.ok else "bold red")
        text.append(clean(outcome.message) + "\n")
        if outcome.state_left:
            text.append("state: ", style="bold")
            text.append(clean(outcome.state_left) + "\n")
        return text

    def on_mount(self) -> None:
        self._show_progress()

    def _show_progress(self) -> None:
        """Show what has arrived so far (events may come before the screen is mounted)."""
        if not self.is_mounted:
            return
        if self.lines:
            self.query_one("#progress-steps", Static).update(self.steps_text())
        if self.outcome is not None:
            self.query_one("#progress-outcome", Static).update(self.outcome_text())
            close = self.query_one("#close", Button)
            close.disabled = False
            close.focus()

    def add_event(self, event: ProgressEvent) -> None:
        self.lines[event.step] = (event.status, event.text, event.fraction)
        self._show_progress()

    def finish(self, outcome: Outcome) -> None:
        self.outcome = outcome
        self._show_progress()

    def on_action_progress(self, message: ActionProgress) -> None:
        message.stop()
        self.add_event(message.event)

    def on_action_finished(self, message: ActionFinished) -> None:
        message.stop()
        outcome = message.outcome
        self.finish(outcome)
        self.notify(
            clean(f"{message.plan.action} {message.plan.target}: {outcome.status}"),
            title="gpucon",
            severity="information" if outcome.ok else "error",
            markup=False,
        )

    def action_close(self) -> None:
        if self.finished:
            self.dismiss(None)
        else:
            self.notify("the action is still running", severity="warning", markup=False)

    def on_button_pressed(self, event: Button.Pressed) -> None:
        event.stop()
        self.action_close()
