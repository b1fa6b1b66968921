"""The recording file: one SQLite database in WAL mode (docs/recording.md says why).

Tables: ``meta`` (format version, fleet, refresh, the file's schema), ``frames`` (``t``,
``kind`` 0 keyframe / 1 delta, ``blob``: the fleet, zstd-compressed MessagePack (formats 1
to 4: zlib-compressed JSON; ``blobs``, ``frames``);
``samples``: that tick's history samples (format 3: columns of numbers, ``columns``; before,
JSON as the fleet), apart so that a seek reads the fleet
without them and the history without the fleet), ``alerts``
(each alert's start and end: seeking to an alert and ``--alerts-only`` read it without
decoding frames) and ``audit`` (the audit records written while recording, as JSON lines).

Each frame is committed on its own: a process killed at any moment leaves every committed
frame readable (WAL: a commit is in the log before it returns; ``synchronous=NORMAL`` risks
only the newest commits on power loss, never the file's consistency). ``prune`` keeps the file
within its size and age caps by dropping whole keyframe groups from the front.
"""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gpucon.recording import writable
from gpucon.recording.blobs import BlobReader, decode_frame, is_zstd, merge_frames

FORMAT = "gpucon-recording/6"
# formats this gpucon reads: 1 wrote a delta's changes an entity at a time (frames.py), 2
# its history samples as JSON (3: as columns, recording.columns), 3 a delta's float fields
# as floats (4: as integers scaled by 10^5, frames.py), 4 the fleet as zlib'd JSON of changed
# fields (5: zstd'd MessagePack of whole changed records, blobs.py and rows.py), 5 a shared
# nested record (a GPU's MIG profile table) in every row (6: by reference, rows.py)
READABLE = frozenset(
    {
        "gpucon-recording/1",
        "gpucon-recording/2",
        "gpucon-recording/3",
        "gpucon-recording/4",
        "gpucon-recording/5",
        FORMAT,
    }
)
# waiting on a lock (another writer, a checkpoint) at most this long before an error
BUSY_TIMEOUT_MS = 2000

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS frames (
    id INTEGER PRIMARY KEY, t REAL NOT NULL, kind INTEGER NOT NULL, blob BLOB NOT NULL,
    samples BLOB);
CREATE INDEX IF NOT EXISTS frames_t ON frames (t);
CREATE TABLE IF NOT EXISTS alerts (
    key TEXT NOT NULL, rule TEXT NOT NULL, target TEXT NOT NULL, severity INTEGER NOT NULL,
    message TEXT NOT NULL, since REAL NOT NULL, start REAL NOT NULL, end REAL);
CREATE INDEX IF NOT EXISTS alerts_start ON alerts (start);
CREATE TABLE IF NOT EXISTS audit (ts REAL NOT NULL, line TEXT NOT NULL);
"""


class RecordingError(Exception):
    """The file is not a gpucon recording, or cannot be opened."""

    def __init__(self, message: str, reason: str | None = None) -> None:
        super().__init__(message)
        self.reason = reason or message  # short: the REC badge's words


class RecordingUnwritable(RecordingError):
    """The file cannot be written: a missing directory, no permission, a full disk."""

    def __init__(self, path: Path, error: OSError) -> None:
        self.path = path
        self.error = error
        super().__init__(
            f"cannot record to {path}: {writable.describe(path, error)}",
            error.strerror or str(error),
        )


def unwritable(path: Path, exc: sqlite3.Error) -> RecordingError | None:
    """``exc`` (met writing ``path`` before the first frame) as the OS error behind it."""
    found = writable.os_error(path, exc)
    return None if found is None else RecordingUnwritable(path, found)


@dataclass(frozen=True, slots=True)
class AlertSpan:
    """One alert as recorded: the frame it first showed in (``start``), the first frame
    without it (``end``; None: still on when the recording ends) and its own ``since``."""

    key: str
    rule: str
    target: str
    severity: int
    message: str
    since: float
    start: float
    end: float | None


class RecordingStore:
    """One open recording file (writer or reader)."""

    def __init__(self, path: Path, *, readonly: bool = False) -> None:
        self.path = path
        self.readonly = readonly
        # format 5's fleet blobs: each delta read with its keyframe's bytes
        self._blobs = BlobReader()
        created = False  # this opening made the file (removed again if it fails)
        try:
            if readonly:
                if not path.is_file():
                    raise RecordingError(f"{path}: no such recording")
                self.db = sqlite3.connect(
                    f"{path.resolve().as_uri()}?mode=ro", uri=True, check_same_thread=False
                )
            else:
                try:
                    created = writable.probe(path)
                except OSError as exc:
                    raise RecordingUnwritable(path, exc) from None
                self.db = sqlite3.connect(path, check_same_thread=False)
                # auto_vacuum must be chosen before the first table exists
                self.db.execute("PRAGMA auto_vacuum=INCREMENTAL")
                self.db.execute("PRAGMA journal_mode=WAL")
                self.db.execute("PRAGMA synchronous=NORMAL")
            self.db.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}")
            if not readonly:
                self.db.executescript(_SCHEMA)
                self.db.commit()
            found = self.meta().get("format")
        except sqlite3.DatabaseError as exc:
            if hasattr(self, "db"):
                self.db.close()
            cause = None if readonly else unwritable(path, exc)
            if not readonly:
                writable.discard(path, created)
            raise cause or RecordingError(
                f"{path}: not a gpucon recording ({exc})", "not a gpucon recording"
            ) from None
        if found is None and readonly:
            raise RecordingError(f"{path}: not a gpucon recording (no format in its meta table)")
        if found is not None and found not in READABLE:
            raise RecordingError(f"{path}: recording format {found!r}, this gpucon reads {FORMAT}")
        if found != FORMAT and not readonly:
            self.set_meta(format=FORMAT)  # what is appended now needs this gpucon to read

    # -- meta ------------------------------------------------------------------------------

    def meta(self) -> dict[str, str]:
        try:
            rows = self.db.execute("SELECT key, value FROM meta").fetchall()
        except sqlite3.OperationalError:  # no meta table: not ours
            return {}
        return {str(k): str(v) for k, v in rows}

    def set_meta(self, **values: str) -> None:
        self.db.executemany(
            "INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)", list(values.items())
        )
        self.db.commit()

    # -- writing ---------------------------------------------------------------------------

    def append(
        self,
        t: float,
        kind: int,
        blob: bytes,
        samples: bytes | None = None,
        *,
        started: list[AlertSpan] = (),  # type: ignore[assignment]
        ended: list[tuple[str, float]] = (),  # type: ignore[assignment]
        audit: list[tuple[float, str]] = (),  # type: ignore[assignment]
    ) -> None:
        """One frame, the alerts that started and ended with it, and new audit lines: one
        transaction, committed before this returns."""
        with self.db:
            self.db.execute(
                "INSERT INTO frames (t, kind, blob, samples) VALUES (?, ?, ?, ?)",
                (t, kind, blob, samples),
            )
            if started:
                self.db.executemany(
                    "INSERT INTO alerts (key, rule, target, severity, message, since, start, end) "
                    "VALUES (?, ?, ?, ?, ?, ?, ?, NULL)",
                    [
                        (a.key, a.rule, a.target, a.severity, a.message, a.since, a.start)
                        for a in started
                    ],
                )
            for key, when in ended:
                self.db.execute(
                    "UPDATE alerts SET end = ? WHERE key = ? AND end IS NULL", (when, key)
                )
            if audit:
                self.db.executemany("INSERT INTO audit (ts, line) VALUES (?, ?)", audit)

    def close_open_alerts(self, when: float) -> None:
        """Alerts still on when a recording stops (or restarts) end there."""
        with self.db:
            self.db.execute("UPDATE alerts SET end = ? WHERE end IS NULL", (when,))

    def size_bytes(self) -> int:
        """Bytes the file's pages hold (free pages not counted; the WAL aside)."""
        # one statement (compiled once, kept by sqlite3's cache): asked after every frame
        page, pages, free = self.db.execute(
            "SELECT * FROM pragma_page_size(), pragma_page_count(), pragma_freelist_count()"
        ).fetchone()
        return int(page) * (int(pages) - int(free))

    def prune(self, *, max_bytes: int, min_t: float) -> int:
        """Drop the oldest keyframe groups while the file is over ``max_bytes`` or its frames
        older than ``min_t``; the newest group always stays. Returns frames dropped."""
        dropped = 0
        while True:
            keys = self.db.execute(
                "SELECT t FROM frames WHERE kind = 0 ORDER BY t LIMIT 2"
            ).fetchall()
            if len(keys) < 2:
                return dropped
            second = float(keys[1][0])
            if second > min_t and self.size_bytes() <= max_bytes:
                return dropped
            with self.db:
                cur = self.db.execute("DELETE FROM frames WHERE t < ?", (second,))
                self.db.execute("DELETE FROM alerts WHERE end IS NOT NULL AND end < ?", (second,))
                self.db.execute("DELETE FROM audit WHERE ts < ?", (second,))
            dropped += cur.rowcount
            self.db.execute("PRAGMA incremental_vacuum")

    def close(self) -> None:
        if not self.readonly:
            # another reader may hold the log: the next open checkpoints it then
            with contextlib.suppress(sqlite3.Error):
                self.db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        self.db.close()

    # -- reading ---------------------------------------------------------------------------

    def span(self) -> tuple[float, float] | None:
        """The first and last frame's time, or None for an empty recording."""
        row = self.db.execute("SELECT MIN(t), MAX(t) FROM frames").fetchone()
        if row is None or row[0] is None:
            return None
        return float(row[0]), float(row[1])

    def keyframe_at_or_before(self, t: float) -> float | None:
        row = self.db.execute(
            "SELECT MAX(t) FROM frames WHERE kind = 0 AND t <= ?", (t,)
        ).fetchone()
        if row is None or row[0] is None:
            row = self.db.execute("SELECT MIN(t) FROM frames WHERE kind = 0").fetchone()
        return None if row is None or row[0] is None else float(row[0])

    def frame_parts(
        self, start: float, end: float | None = None, *, fleet: bool = True, samples: bool = True
    ) -> Iterator[tuple[float, int, dict[str, Any] | None, dict[str, Any] | None]]:
        """(t, kind, the fleet's part, the samples' part) of the frames with ``start <= t <=
        end`` in time order, decoded; a part not asked for (or not there) is None."""
        columns = ("blob" if fleet else "NULL") + ", " + ("samples" if samples else "NULL")
        query = f"SELECT id, t, kind, {columns} FROM frames WHERE t >= ?"
        params: list[Any] = [start]
        if end is not None:
            query += " AND t <= ?"
            params.append(end)
        query += " ORDER BY t, id"
        # a delta of format 5 needs its keyframe's bytes: once a keyframe was read here, the
        # deltas after it are its own; before one, the keyframe before them is looked up
        keyed = False
        for frame_id, t, kind, blob, sample_blob in self.db.execute(query, params):
            if blob is None:
                part = None
            elif not is_zstd(blob):
                part = decode_frame(blob)
            elif kind == 0:
                part = self._blobs.keyframe(frame_id, blob)
                keyed = True
            else:
                if not keyed:
                    keyed = self._find_keyframe(frame_id, float(t))
                part = self._blobs.delta(blob) if keyed else None
            yield (
                float(t),
                int(kind),
                part,
                None if sample_blob is None else decode_frame(sample_blob),
            )

    def _find_keyframe(self, frame_id: int, t: float) -> bool:
        """Read the keyframe before frame ``frame_id`` (at ``t``) into the blob reader,
        unless it holds it already; False when there is none (the file was cut)."""
        row = self.db.execute(
            "SELECT id, blob FROM frames WHERE kind = 0 AND (t < ? OR (t = ? AND id < ?)) "
            "ORDER BY t DESC, id DESC LIMIT 1",
            (t, t, frame_id),
        ).fetchone()
        if row is None or not is_zstd(row[1]):
            return False
        if row[0] != self._blobs.key_id:
            self._blobs.keyframe(int(row[0]), row[1])
        return True

    def frames(
        self, start: float, end: float | None = None
    ) -> Iterator[tuple[float, int, dict[str, Any]]]:
        """Whole frames (the fleet with its samples) with ``start <= t <= end``, in order."""
        for t, kind, fleet, samples in self.frame_parts(start, end):
            frame = fleet or {}
            if samples:
                merge_frames(frame, samples)
            yield t, kind, frame

    def times(self, start: float, end: float) -> list[float]:
        rows = self.db.execute(
            "SELECT t FROM frames WHERE t >= ? AND t <= ? ORDER BY t", (start, end)
        ).fetchall()
        return [float(r[0]) for r in rows]

    def last_times(self, until: float, count: int) -> list[float]:
        """The times of the last ``count`` frames at or before ``until``, oldest first."""
        rows = self.db.execute(
            "SELECT t FROM frames WHERE t <= ? ORDER BY t DESC LIMIT ?", (until, count)
        ).fetchall()
        return [float(r[0]) for r in reversed(rows)]

    def next_time(self, after: float) -> float | None:
        row = self.db.execute("SELECT MIN(t) FROM frames WHERE t > ?", (after,)).fetchone()
        return None if row is None or row[0] is None else float(row[0])

    def previous_time(self, before: float) -> float | None:
        row = self.db.execute("SELECT MAX(t) FROM frames WHERE t < ?", (before,)).fetchone()
        return None if row is None or row[0] is None else float(row[0])

    def alert_spans(self) -> list[AlertSpan]:
        rows = self.db.execute(
            "SELECT key, rule, target, severity, message, since, start, end FROM alerts "
            "ORDER BY start, key"
        ).fetchall()
        return [
            AlertSpan(
                key=str(row[0]),
                rule=str(row[1]),
                target=str(row[2]),
                severity=int(row[3]),
                message=str(row[4]),
                since=float(row[5]),
                start=float(row[6]),
                end=None if row[7] is None else float(row[7]),
            )
            for row in rows
        ]

    def audit_lines(self) -> list[str]:
        return [str(r[0]) for r in self.db.execute("SELECT line FROM audit ORDER BY ts")]
