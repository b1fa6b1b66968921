"""The audit screen: the newest records of this console's audit log, newest at the bottom.

The JSONL file is read in a thread worker (``r`` reads it again); the screen never blocks.
Every field comes from a file others may have written into, so it is shown as ``Text``.
"""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar

from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static

from gpucon.actions.audit import AuditRecord, read_audit
from gpucon.actions.plan import format_ts
from gpucon.widgets.safe_text import clean

EVENT_STYLES = {"intent": "bold", "step": "", "outcome": "bold", "refused": "bold red"}
STATUS_STYLES = {
    "ok": "green",
    "done": "green",
    "failed": "red",
    "timeout": "red",
    "error": "red",
    "refused": "yellow",
    "lock_held": "yellow",
}


def audit_text(records: list[AuditRecord], path: Path) -> Text:
    text = Text()
    text.append(f"Audit log  {clean(str(path))}  ({len(records)} newest)\n\n", style="bold")
    if not records:
        text.append("no action has been recorded yet\n", style="dim")
    for r in records:
        text.append(format_ts(r.ts) + "  ", style="dim")
        text.append(clean(r.operator) + "  ")
        text.append(f"{clean(r.event):<8}", style=EVENT_STYLES.get(r.event, ""))
        text.append(f" {clean(r.action)} {clean(r.target)}")
        if r.step:
            text.append(f"  {clean(r.step)}")
        if r.status:
            text.append(f"  {clean(r.status)}", style=STATUS_STYLES.get(r.status, ""))
        if r.text:
            text.append(f"  {clean(r.text)}")
        text.append(f"  [{clean(r.digest)}]\n", style="dim")
    text.append("\nr reload · Esc close", style="dim")
    return text


class AuditScreen(ModalScreen[None]):
    DEFAULT_CSS = """
    AuditScreen { align: center middle; }
    AuditScreen #audit-box {
        width: 95%; height: 90%; border: thick $accent; background: $surface; padding: 0 1;
    }
    """

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape,q", "app.pop_screen", "Close", id="close_audit"),
        Binding("r", "reload", "Reload", id="reload_audit"),
    ]

    def __init__(self, path: Path, limit: int = 200) -> None:
        super().__init__()
        self.path = path
        self.limit = limit
        self.records: list[AuditRecord] = []

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="audit-box"):
            yield Static(Text("reading the audit log…", style="dim"), id="audit-body")

    def on_mount(self) -> None:
        self.action_reload()

    def action_reload(self) -> None:
        self._load()

    @work(thread=True, exclusive=True, group="audit", exit_on_error=False)
    def _load(self) -> None:
        try:
            records = read_audit(self.path, self.limit)
        except OSError as exc:
            self.app.call_from_thread(self._show_error, f"cannot read {self.path}: {exc}")
            return
        self.app.call_from_thread(self._show, records)

    def _show(self, records: list[AuditRecord]) -> None:
        self.records = records
        self.query_one("#audit-body", Static).update(audit_text(records, self.path))
        self.query_one("#audit-box", VerticalScroll).scroll_end(animate=False)

    def _show_error(self, message: str) -> None:
        self.query_one("#audit-body", Static).update(Text(clean(message), style="bold red"))
