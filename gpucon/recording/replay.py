"""The replay feed: a recording played back to the console as if it came from a hub.

``ReplayFeed`` has what the app needs of a hub (``latest``, ``start``, ``stop``,
``refresh_s``) plus a timeline: pause, step a frame, seek by seconds or to a time, to the
next or previous alert's start, and a speed (×1, ×10, ×60). Every request is queued to the
feed's own thread, which owns the file and the cursor: the UI thread never reads the file or
decodes a frame. Each snapshot carries its recorded time (``taken_at``); ``position`` says
where the replay is, ``paused`` and ``speed`` how it moves.
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from gpucon.model.snapshot import Snapshot
from gpucon.recording.cursor import ReplayCursor
from gpucon.recording.store import AlertSpan, RecordingStore

SPEEDS = (1.0, 10.0, 60.0)
# how often a playing replay hands on a snapshot (wall seconds)
FRAME_INTERVAL_S = 0.25
# how often the file is looked at for frames and alerts written since (wall seconds)
FOLLOW_S = 1.0


@dataclass(frozen=True, slots=True)
class Timeline:
    """Where a replay stands, for the banner: recorded time, span, paused, speed."""

    position: float | None
    start: float | None
    end: float | None
    paused: bool
    speed: float
    # wall seconds the last seek took (None before the first)
    seek_s: float | None = None


class ReplayFeed:
    """Plays a recording; a ``SnapshotFeed`` for ``GpuconApp``."""

    def __init__(
        self,
        store: RecordingStore,
        *,
        start_at: float | None = None,
        paused: bool = False,
        speed: float = 1.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.store = store
        meta = store.meta()
        try:
            self.refresh_s = float(meta.get("refresh_s", "1.0"))
        except ValueError:
            self.refresh_s = 1.0
        self.fleet = meta.get("fleet", "")
        self.alerts: list[AlertSpan] = store.alert_spans()
        self._cursor = ReplayCursor(store)
        self._clock = clock
        self._requests: queue.Queue[tuple[str, float]] = queue.Queue()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._on_snapshot: Callable[[Snapshot], None] | None = None
        self._latest: Snapshot | None = None
        self._position: float | None = None
        self._paused = paused
        self._speed = speed if speed > 0 else 1.0
        self._seek_s: float | None = None
        span = store.span()
        self._span = span
        # when the span and alerts were last read again (a file still being written grows)
        self._checked = clock()
        first = start_at if start_at is not None else (span[0] if span else None)
        if first is not None:
            self._show(self._timed_seek(first))
            self._show(self._cursor.fill_history())

    # -- the SnapshotFeed protocol ---------------------------------------------------------

    @property
    def latest(self) -> Snapshot | None:
        return self._latest

    def start(self, on_snapshot: Callable[[Snapshot], None]) -> None:
        if self._thread is not None:
            return
        self._on_snapshot = on_snapshot
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, name="gpucon-replay", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._requests.put(("stop", 0.0))
        if self._thread is not None:
            self._thread.join(timeout=2.0)
            self._thread = None

    # -- the timeline (any thread) ---------------------------------------------------------

    @property
    def timeline(self) -> Timeline:
        span = self._span
        return Timeline(
            self._position,
            span[0] if span else None,
            span[1] if span else None,
            self._paused,
            self._speed,
            self._seek_s,
        )

    def toggle_pause(self) -> None:
        self._requests.put(("pause", 0.0))

    def step(self, frames: int = 1) -> None:
        self._requests.put(("step", float(frames)))

    def seek_by(self, seconds: float) -> None:
        self._requests.put(("seek_by", seconds))

    def seek_to(self, t: float) -> None:
        self._requests.put(("seek", t))

    def next_alert(self, step: int = 1) -> None:
        """Seek to the start of the next (``step`` 1) or previous (-1) alert."""
        self._requests.put(("alert", float(step)))

    def set_speed(self, speed: float) -> None:
        self._requests.put(("speed", speed))

    def alert_start(self, after: float | None, step: int) -> float | None:
        """The start of the first alert after ``after`` (step 1) or the last before it (-1)."""
        starts = sorted({a.start for a in self.alerts})
        if after is None:
            return starts[0] if starts else None
        if step > 0:
            return next((s for s in starts if s > after + 1e-6), None)
        return next((s for s in reversed(starts) if s < after - 1e-6), None)

    # -- the feed's thread -----------------------------------------------------------------

    def _timed_seek(self, t: float) -> Snapshot | None:
        began = time.perf_counter()
        snapshot = self._cursor.seek(t)
        self._seek_s = time.perf_counter() - began
        return snapshot

    def _show(self, snapshot: Snapshot | None) -> None:
        if snapshot is None:
            return
        self._latest = snapshot
        self._position = snapshot.taken_at
        if self._on_snapshot is not None:
            self._on_snapshot(snapshot)

    def _seek(self, t: float) -> None:
        """Show the snapshot at ``t`` at once; then its full history, unless another
        request is already waiting (a key held down seeks on without filling each)."""
        self._show(self._timed_seek(t))
        if self._requests.empty():
            self._show(self._cursor.fill_history())

    def _handle(self, kind: str, value: float) -> None:
        position = self._position
        if kind == "pause":
            self._paused = not self._paused
        elif kind == "speed":
            self._speed = value if value > 0 else 1.0
        elif kind == "seek":
            self._seek(value)
        elif kind == "seek_by" and position is not None:
            # the frame nearest the time asked for (frames are about a refresh apart, and
            # the last one at or before it would make ten +10 s seeks land short)
            self._seek(position + value + 0.5 * self.refresh_s)
        elif kind == "alert":
            target = self.alert_start(position, int(value))
            if target is not None:
                self._seek(target)
        elif kind == "step" and position is not None:
            self._paused = True
            if value > 0:
                t = self._cursor.next_time(position)
                if t is not None:
                    self._show(self._cursor.advance(t))
            else:
                t = self._cursor.previous_time(position)
                if t is not None:
                    self._seek(t)
        # the snapshot shown again, so the banner follows pause and speed at once
        if kind in ("pause", "speed") and self._latest is not None and self._on_snapshot:
            self._on_snapshot(self._latest)

    def _follow(self, now: float) -> None:
        """A recording still being written: its new end, and the alerts that started (or
        ended) since, read at most once a second and only when the file grew."""
        if now - self._checked < FOLLOW_S:
            return
        self._checked = now
        span = self.store.span()
        if span != self._span:
            self._span = span
            self.alerts = self.store.alert_spans()

    def _run(self) -> None:
        if self._latest is not None and self._on_snapshot is not None:
            self._on_snapshot(self._latest)
        last = self._clock()
        while not self._stop.is_set():
            try:
                kind, value = self._requests.get(timeout=FRAME_INTERVAL_S)
            except queue.Empty:
                kind = ""
            if kind == "stop":
                return
            now = self._clock()
            self._follow(now)
            if kind:
                self._handle(kind, value)
            elapsed, last = now - last, now
            if self._paused or self._position is None or kind:
                continue
            target = self._position + elapsed * self._speed
            snapshot = self._cursor.advance(target)
            if snapshot is not None:
                self._show(snapshot)
            elif self._span is not None and target < self._span[1]:
                # between two frames: the position moves on (time passes, nothing changed)
                self._position = target
