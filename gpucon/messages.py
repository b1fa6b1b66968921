"""Messages the UI passes around; the hub's snapshot is the high-frequency one."""

from __future__ import annotations

from textual.message import Message

from gpucon.model.snapshot import Snapshot


class SnapshotArrived(Message):
    """A new snapshot from the hub. Replaceable: only the newest pending one is handled."""

    def __init__(self, snapshot: Snapshot) -> None:
        super().__init__()
        self.snapshot = snapshot

    def can_replace(self, message: Message) -> bool:
        return isinstance(message, SnapshotArrived)
