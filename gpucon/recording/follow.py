"""A live wall that follows a shared recording: many viewers, one set of reads of the fleet.

``gpucon serve`` reads the fleet once, in its own hub, and records it to a private file as it
goes; each browser's console is a ``FollowFeed`` on that file (SQLite in WAL mode: readers in
other processes never block the writer). A viewer adds no Redis, Prometheus, NVML or HTTP read:
N walls cost the fleet what one does (``tests/integration/test_serve_shared_hub.py``).

The feed keeps at the file's end, a frame behind the hub at most (it looks for new frames
every ``FRAME_INTERVAL_S``). When no frame comes for ``silent_after_s`` (the shared reader
died or hangs) the wall must not go on showing the last one as current: the feed shows it
again stamped now, every source marked down with the shared reader's silence as its error,
so the header says DOWN with the true age of each source's last good read.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import msgspec

from gpucon.model.fleet import Health
from gpucon.model.snapshot import Snapshot
from gpucon.recording.replay import ReplayFeed
from gpucon.recording.store import RecordingStore

# frames a live hub writes every refresh: silent after this many missed (and at least 5 s)
SILENT_REFRESHES = 5


class FollowFeed(ReplayFeed):
    """The newest frames of a recording being written, as a live hub would hand them on."""

    def __init__(
        self,
        store: RecordingStore,
        *,
        silent_after_s: float | None = None,
        wall_clock: Callable[[], float] = time.time,
    ) -> None:
        span = store.span()
        super().__init__(store, start_at=None if span is None else span[1])
        self.silent_after_s = (
            silent_after_s
            if silent_after_s is not None
            else max(5.0, SILENT_REFRESHES * self.refresh_s)
        )
        self._wall = wall_clock
        self._said_silent_at = 0.0

    def _follow(self, now: float) -> None:
        super()._follow(now)
        span = self._span
        if span is None:
            return
        if self._position is None:  # the first frame came after this viewer opened
            self._seek(span[1])
            return
        if self._position < span[1] - 2 * self.refresh_s:
            # fell behind (a slow machine): a wall shows now, not a replay catching up
            self._seek(span[1])
        wall = self._wall()
        silent = wall - span[1]
        latest, show = self._latest, self._on_snapshot
        if silent > self.silent_after_s and latest is not None and show is not None:
            if wall - self._said_silent_at < 1.0:
                return  # said once a second, as the wall's clock moves
            self._said_silent_at = wall
            show(silent_snapshot(latest, wall, span[1]))


def silent_snapshot(snapshot: Snapshot, now: float, last_frame_at: float) -> Snapshot:
    """``snapshot`` shown at ``now`` with every source down: the shared reader has written
    nothing since ``last_frame_at``, so nothing on it is current."""
    clock = time.strftime("%H:%M:%S", time.localtime(last_frame_at))
    why = f"the wall's shared reader has written nothing since {clock}"
    sources = {
        name: msgspec.structs.replace(status, health=Health.DOWN, error=why)
        for name, status in snapshot.sources.items()
    }
    return msgspec.structs.replace(snapshot, taken_at=now, sources=sources)
