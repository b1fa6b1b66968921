"""The audit screen: the newest audit records, newest at the bottom, each marked with its origin.

This console's JSONL file, and where the fleet has Redis the shared stream ``gpucon:audit``
(other operators' actions too), merged by time (``gpucon.actions.audit.merge_audit``). Both
are read in a thread worker (``r`` reads them again); the screen never blocks, and a stream
that cannot be read is named in the header while the file's records are still shown. Each
record names its fleet; an intent that never got its outcome shows ``interrupted`` (or
``running`` while its operator still holds the target's lock, where the stream's Redis says
so). Every field comes from a file or stream others may have written into, so it is shown as
``Text``.
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

from gpucon.actions.audit import (
    ORIGIN_BOTH,
    ORIGIN_FILE,
    AuditEntry,
    AuditStream,
    merge_audit,
    read_audit,
    run_statuses,
)
from gpucon.controls.audit_log import AuditRecord
from gpucon.errors import format_ts
from gpucon.registry import keys
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
    "interrupted": "bold red",
    "running": "cyan",
}


ORIGIN_STYLES = {ORIGIN_FILE: "cyan", ORIGIN_BOTH: "cyan", "redis": "magenta"}


def audit_text(
    entries: list[AuditEntry],
    path: Path,
    *,
    stream: str | None = None,
    problems: tuple[str, ...] = (),
    statuses: list[str] | None = None,
) -> Text:
    """The screen's body; ``statuses`` (from ``run_statuses``) replace the records' own."""
    text = Text()
    where = clean(str(path)) + (f" + {clean(stream)}" if stream else "")
    text.append(f"Audit log  {where}  ({len(entries)} newest)\n", style="bold")
    for problem in problems:
        text.append(clean(problem) + "\n", style="bold red")
    text.append("\n")
    if not entries:
        text.append("no action has been recorded yet\n", style="dim")
    width = max((len(e.origin) for e in entries), default=0)
    fleet_width = max((len(clean(e.record.fleet or "?")) for e in entries), default=0)
    shown = statuses if statuses is not None else [e.record.status for e in entries]
    for entry, status in zip(entries, shown, strict=True):
        r = entry.record
        text.append(format_ts(r.ts) + "  ", style="dim")
        text.append(f"{clean(entry.origin):<{width}}  ", style=ORIGIN_STYLES.get(entry.origin, ""))
        text.append(f"{clean(r.fleet or '?'):<{fleet_width}}  ")
        text.append(clean(r.operator) + "  ")
        text.append(f"{clean(r.event):<8}", style=EVENT_STYLES.get(r.event, ""))
        text.append(f" {clean(r.action)} {clean(r.target)}")
        if r.step:
            text.append(f"  {clean(r.step)}")
        if status:
            text.append(f"  {clean(status)}", style=STATUS_STYLES.get(status, ""))
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

    def __init__(self, path: Path, limit: int = 200, stream: AuditStream | None = None) -> None:
        super().__init__()
        self.path = path
        self.limit = limit
        self.stream = stream
        self.entries: list[AuditEntry] = []
        self.records: list[AuditRecord] = []
        self.statuses: list[str] = []
        self.loaded = False

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="audit-box"):
            yield Static(Text("reading the audit log…", style="dim"), id="audit-body")

    def on_mount(self) -> None:
        self.action_reload()

    def on_unmount(self) -> None:
        if self.stream is not None:
            self._close_stream(self.stream)

    @work(thread=True, group="audit-close", exit_on_error=False)
    def _close_stream(self, stream: AuditStream) -> None:
        stream.close()

    def action_reload(self) -> None:
        self._load()

    @work(thread=True, exclusive=True, group="audit", exit_on_error=False)
    def _load(self) -> None:
        problems: list[str] = []
        try:
            local = read_audit(self.path, self.limit)
        except Exception as exc:  # unreadable, or a bug: say so rather than stay "reading…"
            local = []
            problems.append(f"cannot read {self.path}: {type(exc).__name__}: {exc}")
        shared: list[AuditRecord] = []
        holder = None
        if self.stream is not None:
            try:
                shared = self.stream.read(self.limit)
                holder = getattr(self.stream, "lock_holder", None)  # Redis answers: ask it
            except Exception as exc:  # Redis down or slow: the file's records still show
                problems.append(f"cannot read {keys.AUDIT}: {type(exc).__name__}: {exc}")
        entries = merge_audit(local, shared, self.limit)
        # who holds a lock now tells a running action from an interrupted one (a read)
        statuses = run_statuses([e.record for e in entries], holder)
        self.app.call_from_thread(self._show, entries, tuple(problems), statuses)

    def _show(
        self,
        entries: list[AuditEntry],
        problems: tuple[str, ...] = (),
        statuses: list[str] | None = None,
    ) -> None:
        self.entries = entries
        self.records = [e.record for e in entries]
        self.statuses = statuses if statuses is not None else [r.status for r in self.records]
        self.loaded = True
        stream = f"redis {keys.AUDIT}" if self.stream is not None else None
        body = audit_text(
            entries, self.path, stream=stream, problems=problems, statuses=self.statuses
        )
        self.query_one("#audit-body", Static).update(body)
        self.query_one("#audit-box", VerticalScroll).scroll_end(animate=False)
