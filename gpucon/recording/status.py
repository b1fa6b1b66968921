"""What a console shows of its recording: the REC badge's state (file, size, behind, failed).

The size is the recording's: what its frames, alerts and audit records take in the file (what
the ``[record] max_mib`` cap counts, and the file's size once it is closed), not the disk's
whole use, which adds SQLite's write-ahead log: up to ~4 MiB, reused, folded into the file on
close. Counting the log made a 20-second recording read 340 KiB for 60 KiB of data, and the
number jump about as SQLite checkpointed; it is said only when it grows past ``LOG_SHOWN_AT``.

``Recorder.status()`` gives a ``RecordingStatus``; the status bar asks for one at each redraw
and shows ``badge()``. Pure, and light to import (the UI imports it).
"""

from __future__ import annotations

from dataclasses import dataclass

# snapshots waiting for the writer from which the recording is said to be behind
BEHIND_AT = 8
# SQLite folds its write-ahead log into the file every 1000 pages (4 MiB) and reuses it, so
# the log's few MiB beside the recording are a constant, said in no badge; a log past twice
# that is not being folded in (a reader holds it) and grows: the badge says it from then on
LOG_SHOWN_AT = 8 << 20

OK, BEHIND, FAILED = "ok", "behind", "failed"


@dataclass(frozen=True, slots=True)
class RecordingStatus:
    """A recording as its console sees it now."""

    file: str  # the file's name (not its directory: the badge is short)
    # the recording: the pages its data holds (what ``[record] max_mib`` caps, and the file's
    # size once it is closed); the write-ahead log beside it is ``log_bytes``
    size_bytes: int
    waiting: int  # snapshots queued for the writer
    dropped: int  # snapshots dropped because the writer fell behind (since start)
    error: str | None  # why the recording stopped (None: it has not)
    # the reason, short, for the badge ("No space left on device"); None: the error's words
    reason: str | None = None
    # False: the file could not be opened for writing, nothing was ever recorded
    started: bool = True
    log_bytes: int = 0  # SQLite's write-ahead log on disk beside the file

    @property
    def state(self) -> str:
        if self.error is not None:
            return FAILED
        return BEHIND if self.waiting >= BEHIND_AT or self.dropped else OK

    def badge(self) -> str:
        """``REC night.sqlite 12.3 MB``; ``REC BEHIND ... (5 dropped)``; ``REC FAILED
        night.sqlite at 3.0 GiB: database or disk is full``."""
        size = _size(self.size_bytes)
        if self.log_bytes >= LOG_SHOWN_AT:
            size += f" +{_size(self.log_bytes)} log"
        state = self.state
        if state == FAILED:
            at = f" at {size}" if self.started else ""
            return f"REC FAILED {self.file}{at}: {self.reason or self.error}"
        if state == BEHIND:
            lost = f", {self.dropped} dropped" if self.dropped else ""
            return f"REC BEHIND {self.file} {size} ({self.waiting} waiting{lost})"
        return f"REC {self.file} {size}"


def _size(n: int) -> str:
    if n >= 1 << 30:
        return f"{n / (1 << 30):.1f} GiB"
    if n >= 1 << 20:
        return f"{n / (1 << 20):.1f} MiB"
    return f"{n / 1024:.0f} KiB"
