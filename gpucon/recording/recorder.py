"""The recorder: frames each snapshot as the hub hands it over, and writes the frames to the
file in its own thread.

``Recorder.__call__`` is the hub's subscriber (``Hub.subscribe``), called on the hub's thread
right after each tick: it builds that tick's delta there and then (the ~2,000 records the tick
changed are still in the CPU's caches, and no other thread has to wake and take the
interpreter for it) and queues the compressed frame; the writer thread commits it (a ``kill
-9`` loses at most the frame being written), notes alerts that start and end, copies new
audit records from the console's audit file and keeps the file within its caps, so neither
the hub's thread nor the UI waits on the disk. A keyframe (~15 ms at 512 GPUs, every two minutes)
is framed on the writer thread instead, and so is any snapshot that arrives while one is
queued unframed (frames are built in order, by one thread at a time). If the disk falls
behind by ``QUEUE_LIMIT`` frames, a fresh snapshot is not framed and is counted as dropped (the
next frame is a delta against the last one framed, which is queued: the file stays
consistent); a recorder made with ``block`` makes its caller wait for room instead.
"""

from __future__ import annotations

import json
import queue
import sqlite3
import threading
import time
from pathlib import Path

from gpucon.config import KEYFRAME_S
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

# frames waiting for the disk; beyond this a fresh snapshot is dropped, not framed
QUEUE_LIMIT = 64
_STOP = object()


class _Frame:
    """One snapshot on its way to the file: framed already (``blobs``) or to be framed by the
    writer thread (``snapshot``), with the alerts that started and ended with it."""

    __slots__ = ("blobs", "ended", "key", "snapshot", "started", "t")

    def __init__(
        self,
        t: float,
        key: bool,
        started: list[AlertSpan],
        ended: list[tuple[str, float]],
        snapshot: Snapshot | None = None,
        blobs: tuple[bytes, bytes] | None = None,
    ) -> None:
        self.t = t
        self.key = key
        self.started = started
        self.ended = ended
        self.snapshot = snapshot
        self.blobs = blobs


class Recorder:
    """Writes the snapshots it is given to one recording file; the disk is written off the
    caller's thread."""

    def __init__(
        self,
        path: Path,
        *,
        fleet: str,
        refresh_s: float,
        keyframe_s: float = KEYFRAME_S,
        max_bytes: int = 1 << 30,
        max_age_s: float = 7 * 86_400.0,
        audit_path: Path | None = None,
        block: bool = False,
        moves: SectionMoves | None = None,
        caller_frames: bool = True,
    ) -> None:
        self.path = path
        # True: the caller waits for room instead of dropping (recording faster than real
        # time, where the caller is the only clock)
        self.block = block
        # True: a delta is built on the caller's thread (the hub's, right after its tick);
        # False: every snapshot is framed on the writer thread (as until the eighth round:
        # benchmarks compare the two)
        self.caller_frames = caller_frames
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
        # snapshots queued unframed (a keyframe, and what came while one waited): while there
        # are any, the writer thread frames and the caller queues unframed too, so that frames
        # are built in order and the writers above are used by one thread at a time
        self._unframed = 0
        self._unframed_lock = threading.Lock()
        self._queue: queue.Queue[object] = queue.Queue()
        # the caller's side: the last snapshot's time and keyframe's, the alerts on
        self._last_key_t: float | None = None
        self._last_t: float | None = None
        self._alerts: dict[str, float] = {}
        self._alerts_seen: object = None  # the alerts tuple last compared
        self._audit_offset = _file_size(audit_path)
        self._thread = threading.Thread(target=self._run, name="gpucon-recorder", daemon=True)
        self._thread.start()

    def __call__(self, snapshot: Snapshot) -> None:
        """Frame one snapshot and queue it for the disk (the hub's thread calls this after
        each tick; it never waits on the disk unless the recorder was made to)."""
        if self.error is not None:
            return  # the recording stopped (a full disk): nothing is framed, nothing kept
        t = snapshot.taken_at
        if self._last_t is not None and t <= self._last_t:
            return  # the same tick twice (a primed first frame): one frame per time
        if not self._room():
            self.dropped += 1  # the disk is behind: the next frame is a delta against the last
            return
        key = self._last_key_t is None or t - self._last_key_t >= self.keyframe_s
        started, ended = self._alert_changes(snapshot, t)
        with self._unframed_lock:
            here = self.caller_frames and not key and self._unframed == 0
            if not here:
                self._unframed += 1
        if here:
            try:
                blobs = frame_blobs(self._writer, self._blobs, self._columns, snapshot, False)
            except Exception as exc:  # a bug: the recording stops, never the hub's thread
                self._fail(exc)
                return
            item = _Frame(t, False, started, ended, blobs=blobs)
        else:
            item = _Frame(t, key, started, ended, snapshot=snapshot)
        self._last_t = t
        if key:
            self._last_key_t = t
        self._queue.put(item)

    def _room(self) -> bool:
        """Whether the disk's queue takes one more frame (``block``: after waiting for room
        while the writer thread lives)."""
        while self._queue.qsize() >= QUEUE_LIMIT:
            if not self.block or not self._thread.is_alive():
                return False
            time.sleep(0.005)
        return True

    def _alert_changes(
        self, snapshot: Snapshot, t: float
    ) -> tuple[list[AlertSpan], list[tuple[str, float]]]:
        """The alerts that started and ended since the last snapshot framed."""
        if snapshot.alerts is self._alerts_seen:  # the same tuple: none started or ended
            return [], []
        self._alerts_seen = snapshot.alerts
        now_on = {a.key: a for a in snapshot.alerts}
        started = [
            AlertSpan(a.key, a.rule, a.target, int(a.severity), a.message, a.since, t, None)
            for k, a in now_on.items()
            if k not in self._alerts
        ]
        ended = [(k, t) for k in self._alerts if k not in now_on]
        self._alerts = {k: t for k in now_on}
        return started, ended

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
            assert isinstance(item, _Frame)
            try:
                self._write(item)
            except Exception as exc:  # a full disk, a file removed: say so, keep the console
                self._fail(exc)
                self._drain()
                return

    def _fail(self, exc: Exception) -> None:
        self.reason = str(exc)
        self.error = f"recording stopped: {exc}"

    def _drain(self) -> None:
        """Let go of the frames still queued (a stopped recording keeps none alive)."""
        while True:
            try:
                self._queue.get_nowait()
            except queue.Empty:
                return

    def _write(self, item: _Frame) -> None:
        t, key = item.t, item.key
        blobs = item.blobs
        if blobs is None:  # a keyframe, or a snapshot queued behind one: framed here
            assert item.snapshot is not None
            try:
                blobs = frame_blobs(self._writer, self._blobs, self._columns, item.snapshot, key)
            finally:
                item.snapshot = None
                with self._unframed_lock:
                    self._unframed -= 1
        if key:
            self.store.set_meta(schema=json.dumps(self._writer.schema()))
        self.store.append(
            t,
            KEYFRAME if key else DELTA,
            *blobs,
            started=item.started,
            ended=item.ended,
            audit=self._new_audit(t),
        )
        self.frames_written += 1
        self.size_bytes = self.store.size_bytes()
        self.log_bytes = _file_size(_log_path(self.path))
        if key:
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
