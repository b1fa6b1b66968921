"""The recorder: takes each snapshot from the hub and writes it to the file in its own thread.

``Recorder.__call__`` is the hub's subscriber (``Hub.subscribe``): it only queues the snapshot,
so neither the hub's thread nor the UI waits on encoding or the disk. The writer thread turns
snapshots into frames (a keyframe every ``keyframe_s``, deltas between), notes alerts that
start and end, copies new audit records from the console's audit file, commits each frame
(a ``kill -9`` loses at most the frame being written) and keeps the file within its caps.
If the disk falls behind, the queue's oldest snapshots are dropped and counted (the next
frame is a delta against the last one written, so the file stays consistent).
"""

from __future__ import annotations

import json
import queue
import sqlite3
import threading
import time
from pathlib import Path

from gpucon.model.section_moves import SectionMoves
from gpucon.model.snapshot import Snapshot
from gpucon.recording.blobs import BlobWriter
from gpucon.recording.collector import collector_paused
from gpucon.recording.columns import ColumnWriter, fleet_columns, newest_columns
from gpucon.recording.frames import DELTA, KEYFRAME
from gpucon.recording.status import RecordingStatus
from gpucon.recording.store import (
    AlertSpan,
    RecordingError,
    RecordingStore,
    unwritable,
)
from gpucon.recording.writer import FrameWriter

# snapshots waiting for the writer; beyond this the oldest are dropped
QUEUE_LIMIT = 64
# how long the writer lets a fresh snapshot settle before framing it: none. Framed at once, the
# ~2,000 records a 512-GPU tick changes (the hub's thread made them a moment before) are still
# in the CPU's caches; framed 0.2 s later (as until the seventh round, so as not to share the
# interpreter with the UI's turn) a frame took ~1 ms more: 2.8 ms against 1.8 beside a live hub
# (benchmarks/RESULTS.md "Seventh round")
SETTLE_S = 0.0
_STOP = object()


class Recorder:
    """Writes the snapshots it is given to one recording file, off the caller's thread."""

    def __init__(
        self,
        path: Path,
        *,
        fleet: str,
        refresh_s: float,
        keyframe_s: float = 60.0,
        max_bytes: int = 1 << 30,
        max_age_s: float = 7 * 86_400.0,
        audit_path: Path | None = None,
        block: bool = False,
        moves: SectionMoves | None = None,
        settle_s: float | None = None,
    ) -> None:
        self.path = path
        # None: ``SETTLE_S`` (a quarter of the refresh at most), none when recording faster
        # than real time (``block``); a kill -9 loses at most the last tick either way
        self.settle_s = (
            (0.0 if block else min(SETTLE_S, refresh_s / 4)) if settle_s is None else settle_s
        )
        # True: the caller waits for room instead of dropping (recording faster than real
        # time, where the caller is the only clock)
        self.block = block
        self.fleet = fleet
        self.keyframe_s = keyframe_s
        self.max_bytes = max_bytes
        self.max_age_s = max_age_s
        self.audit_path = audit_path
        self.store = RecordingStore(path)
        found = self.store.meta().get("fleet")
        if found is not None and found != fleet:
            self.store.close()
            raise RecordingError(
                f"{path} records fleet {found!r}, not {fleet!r}: record this fleet to another file",
                "it records another fleet",
            )
        try:
            self.store.set_meta(fleet=fleet, refresh_s=repr(refresh_s))
            span = self.store.span()
            if span is not None:  # a console restarted on its recording: what was on ended
                self.store.close_open_alerts(span[1])
        except sqlite3.Error as exc:  # a full disk, a file made read-only
            self.store.close()
            raise unwritable(path, exc) or RecordingError(f"{path}: {exc}") from None
        self.frames_written = 0
        self.dropped = 0
        self.error: str | None = None
        self.reason: str | None = None  # the error, short (the REC badge's words)
        # measured after each frame (the status bar reads them): the recording (the pages its
        # data holds: what max_bytes caps, the file once closed) and its write-ahead log
        self.size_bytes = self.store.size_bytes()
        self.log_bytes = _file_size(_log_path(path))
        # the fleet a frame at a time; the history samples as columns, read from the history
        # (``moves``: the hub's findings of which entities changed, ``Hub.moves``)
        self._writer = FrameWriter(moves=moves)
        self._columns = ColumnWriter()
        self._blobs = BlobWriter()
        self._queue: queue.Queue[object] = queue.Queue(maxsize=QUEUE_LIMIT)
        self._last_key_t: float | None = None
        self._last_t: float | None = None
        self._alerts: dict[str, float] = {}
        self._alerts_seen: object = None  # the alerts tuple last compared
        self._audit_offset = _file_size(audit_path)
        self._thread = threading.Thread(target=self._run, name="gpucon-recorder", daemon=True)
        self._thread.start()

    def __call__(self, snapshot: Snapshot) -> None:
        """Queue one snapshot (the hub's thread calls this each tick; it never blocks unless
        the recorder was made to)."""
        if self.error is not None:
            return  # the recording stopped (a full disk): nothing is queued, nothing kept
        if self.block:
            while self._thread.is_alive():  # a writer that died (a full disk) takes no more
                try:
                    self._queue.put(snapshot, timeout=0.5)
                    return
                except queue.Full:
                    continue
            return
        while True:
            try:
                self._queue.put_nowait(snapshot)
                return
            except queue.Full:
                try:
                    self._queue.get_nowait()
                    self.dropped += 1
                except queue.Empty:
                    pass

    def status(self) -> RecordingStatus:
        """The REC badge's state (any thread)."""
        return RecordingStatus(
            self.path.name,
            self.size_bytes,
            self._queue.qsize(),
            self.dropped,
            self.error,
            self.reason,
            log_bytes=self.log_bytes,
        )

    def close(self, timeout_s: float = 5.0) -> None:
        """Write what is queued, end the alerts still on, and close the file (a file that
        failed is closed as it is: the console's exit does not fail with it)."""
        if self._thread.is_alive():
            self._queue.put(_STOP)
            self._thread.join(timeout_s)
        try:
            if self._last_t is not None:
                self.store.close_open_alerts(self._last_t)
        except sqlite3.Error as exc:
            self.error = self.error or f"recording stopped: {exc}"
        self.store.close()

    # -- the writer thread -----------------------------------------------------------------

    def _run(self) -> None:
        while True:
            item = self._queue.get()
            if item is _STOP:
                return
            assert isinstance(item, Snapshot)
            if self.settle_s and self._queue.empty():  # a fresh tick: after the UI's turn
                time.sleep(self.settle_s)
            try:
                self._write(item)
            except Exception as exc:  # a full disk, a file removed: say so, keep the console
                self.reason = str(exc)
                self.error = f"recording stopped: {exc}"
                self._drain()
                return

    def _drain(self) -> None:
        """Let go of the snapshots still queued (a stopped recording keeps none alive)."""
        while True:
            try:
                self._queue.get_nowait()
            except queue.Empty:
                return

    def _write(self, snapshot: Snapshot) -> None:
        t = snapshot.taken_at
        if self._last_t is not None and t <= self._last_t:
            return  # the same tick twice (a primed first frame): one frame per time
        key = self._last_key_t is None or t - self._last_key_t >= self.keyframe_s
        blobs = frame_blobs(self._writer, self._blobs, self._columns, snapshot, key)
        if key:
            self.store.set_meta(schema=json.dumps(self._writer.schema()))
        started: list[AlertSpan] = []
        ended: list[tuple[str, float]] = []
        if snapshot.alerts is not self._alerts_seen:  # the same tuple: none started or ended
            self._alerts_seen = snapshot.alerts
            now_on = {a.key: a for a in snapshot.alerts}
            started = [
                AlertSpan(a.key, a.rule, a.target, int(a.severity), a.message, a.since, t, None)
                for k, a in now_on.items()
                if k not in self._alerts
            ]
            ended = [(k, t) for k in self._alerts if k not in now_on]
            self._alerts = {k: t for k in now_on}
        self.store.append(
            t,
            KEYFRAME if key else DELTA,
            *blobs,
            started=started,
            ended=ended,
            audit=self._new_audit(t),
        )
        self.frames_written += 1
        self.size_bytes = self.store.size_bytes()
        self.log_bytes = _file_size(_log_path(self.path))
        self._last_t = t
        if key:
            self._last_key_t = t
            self.store.prune(max_bytes=self.max_bytes, min_t=t - self.max_age_s)

    def _new_audit(self, now: float) -> list[tuple[float, str]]:
        """Audit records appended to the console's file since the last frame."""
        path = self.audit_path
        if path is None:
            return []
        size = _file_size(path)
        if size < self._audit_offset:  # rotated or truncated: read it from the start
            self._audit_offset = 0
        if size == self._audit_offset:
            return []
        with path.open("rb") as fh:
            fh.seek(self._audit_offset)
            data = fh.read(size - self._audit_offset)
        # only whole lines; a line still being written is read next time
        end = data.rfind(b"\n") + 1
        self._audit_offset += end
        lines: list[tuple[float, str]] = []
        for raw in data[:end].decode("utf-8", errors="replace").splitlines():
            if not raw.strip():
                continue
            try:
                ts = float(json.loads(raw).get("ts", now))
            except (ValueError, TypeError, AttributeError):
                ts = now
            lines.append((ts, raw))
        return lines


def frame_blobs(
    writer: FrameWriter, blobs: BlobWriter, columns: ColumnWriter, snapshot: Snapshot, key: bool
) -> tuple[bytes, bytes]:
    """One frame as stored: (the fleet, the history samples), compressed."""
    with collector_paused():
        if key:
            fleet = blobs.keyframe(writer.keyframe(snapshot))
        else:
            fleet = blobs.delta(writer.delta(snapshot))
        # the samples the hub appended to its history this tick, read from it as columns
        found = newest_columns(snapshot.history, snapshot.taken_at) or fleet_columns(snapshot)
        return fleet, columns.encode(*found, key=key)


def _log_path(path: Path) -> Path:
    """SQLite's write-ahead log beside the recording."""
    return path.with_name(path.name + "-wal")


def _file_size(path: Path | None) -> int:
    if path is None:
        return 0
    try:
        return path.stat().st_size
    except OSError:
        return 0


def wait_written(recorder: Recorder, frames: int, timeout_s: float = 10.0) -> bool:
    """Wait until ``frames`` frames are written (tests and the headless recorder's exit)."""
    deadline = time.monotonic() + timeout_s
    while recorder.frames_written < frames and time.monotonic() < deadline:
        time.sleep(0.01)
    return recorder.frames_written >= frames
