"""The audit log: one JSON line per action event, and the Redis stream ``gpucon:audit``.

Events of one action run, in order: ``intent`` (before the first step), one ``step`` per step
result, then ``outcome``; ``refused`` stands alone when the action never started (lock held,
failed precondition). Every record carries the time, the operator (user@host), the action,
the target and the plan's digest. The file is the record of this operator's console; the
stream (written through the registry control) is the fleet's shared record.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from gpucon.actions.plan import JsonValue

AUDIT_EVENTS = ("intent", "step", "outcome", "refused")


# the latest time a record may carry: 9999-12-31 23:59:59 UTC (what a datetime can show)
MAX_TS = 253402300799.0


def audit_ts(value: object) -> float:
    """A record's time as a float; ValueError naming ``ts`` when it cannot be one."""
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        raise ValueError(f"ts: expected a unix time, got {value!r}")
    try:
        ts = float(value)
    except (OverflowError, ValueError):
        raise ValueError(f"ts: expected a unix time, got {value!r}") from None
    if not math.isfinite(ts) or not 0.0 <= ts <= MAX_TS:
        raise ValueError(f"ts: expected a unix time between 1970 and 9999, got {value!r}")
    return ts


@dataclass(frozen=True, slots=True)
class AuditRecord:
    ts: float
    operator: str
    event: str  # one of AUDIT_EVENTS
    action: str
    target: str
    digest: str
    status: str = ""
    step: str = ""
    text: str = ""

    def to_dict(self) -> dict[str, JsonValue]:
        return {
            "ts": self.ts,
            "operator": self.operator,
            "event": self.event,
            "action": self.action,
            "target": self.target,
            "digest": self.digest,
            "status": self.status,
            "step": self.step,
            "text": self.text,
        }

    @classmethod
    def from_dict(cls, raw: Mapping[str, JsonValue]) -> AuditRecord:
        """The record in ``raw``; ValueError naming ``ts`` when its time is missing, not a
        number, not finite or outside the years 1970..9999 (the readers skip such a record)."""
        ts = audit_ts(raw.get("ts"))

        def text(key: str) -> str:
            value = raw.get(key, "")
            return "" if value is None else str(value)

        return cls(
            ts=ts,
            operator=text("operator"),
            event=text("event"),
            action=text("action"),
            target=text("target"),
            digest=text("digest"),
            status=text("status"),
            step=text("step"),
            text=text("text"),
        )


StreamSink = Callable[[Mapping[str, JsonValue]], None]


class AuditLog:
    """Appends records to the JSONL file and, where given, the registry's stream.

    A failure to write the stream does not stop the action (the file still has the record);
    it is kept in ``stream_errors`` and shown in the outcome. A failure to write the file
    does stop it: an action that cannot be recorded does not run.
    """

    def __init__(
        self,
        path: Path,
        stream: StreamSink | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.path = path
        self.stream = stream
        self.clock = clock
        self.stream_errors: list[str] = []
        self._lock = threading.Lock()

    def write(self, record: AuditRecord) -> None:
        line = json.dumps(record.to_dict(), sort_keys=True, ensure_ascii=False) + "\n"
        with self._lock:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
            try:
                os.write(fd, line.encode())
            finally:
                os.close(fd)
        if self.stream is not None:
            try:
                self.stream(record.to_dict())
            except Exception as exc:  # the file has it; say so, don't stop the action
                self.stream_errors.append(f"audit stream: {type(exc).__name__}: {exc}")

    def record(
        self,
        *,
        operator: str,
        event: str,
        action: str,
        target: str,
        digest: str,
        status: str = "",
        step: str = "",
        text: str = "",
    ) -> AuditRecord:
        rec = AuditRecord(self.clock(), operator, event, action, target, digest, status, step, text)
        self.write(rec)
        return rec


def read_audit(path: Path, limit: int | None = None) -> list[AuditRecord]:
    """The last ``limit`` records of the JSONL file, oldest first; bad lines are skipped."""
    if not path.exists():
        return []
    keep: deque[AuditRecord] = deque(maxlen=limit if limit and limit > 0 else None)
    with path.open(encoding="utf-8", errors="replace") as f:
        for line in f:
            line = line.strip()
            if not line:
                continue
            try:
                raw = json.loads(line)
            except json.JSONDecodeError:
                continue
            if isinstance(raw, dict):
                with contextlib.suppress(ValueError):  # a record without a usable time
                    keep.append(AuditRecord.from_dict(raw))
    return list(keep)


def records_from_rows(rows: Iterable[Mapping[str, JsonValue]]) -> list[AuditRecord]:
    """Stream rows as records, in order; a row without a usable time is skipped."""
    records = []
    for row in rows:
        with contextlib.suppress(ValueError):
            records.append(AuditRecord.from_dict(row))
    return records


# where an audit entry was read: this console's file, the fleet's stream, or both (this
# console's own actions, which it writes to both)
ORIGIN_FILE = "file"
ORIGIN_STREAM = "redis"
ORIGIN_BOTH = "file+redis"


@dataclass(frozen=True, slots=True)
class AuditEntry:
    """One audit record and where it was read from (``ORIGIN_*``)."""

    record: AuditRecord
    origin: str


def _same(record: AuditRecord) -> tuple[object, ...]:
    return tuple(record.to_dict().values())


def merge_audit(
    local: Iterable[AuditRecord], stream: Iterable[AuditRecord], limit: int | None = None
) -> list[AuditEntry]:
    """The file's and the stream's records in one list by time, oldest first, each marked
    with its origin; a record in both (this console's own) appears once, as ``file+redis``.

    Given each source's newest ``limit`` records, the result's newest ``limit`` are exact.
    """
    entries = [AuditEntry(r, ORIGIN_FILE) for r in local]
    unmatched: dict[tuple[object, ...], list[int]] = {}
    for i, entry in enumerate(entries):
        unmatched.setdefault(_same(entry.record), []).append(i)
    for r in stream:
        waiting = unmatched.get(_same(r))
        if waiting:
            i = waiting.pop(0)
            entries[i] = AuditEntry(entries[i].record, ORIGIN_BOTH)
        else:
            entries.append(AuditEntry(r, ORIGIN_STREAM))
    entries.sort(key=lambda e: e.record.ts)  # stable: one source's order is kept on equal times
    return entries[-limit:] if limit and limit > 0 else entries


class AuditStreamReader:
    """Reads the fleet's ``gpucon:audit`` stream (XREVRANGE only) over its own connection.

    Connects on the first ``read`` (call it from a worker thread, never the UI thread), with
    the fleet's Redis timeout on connect and on every read.
    """

    def __init__(self, url: str, timeout_s: float, client_name: str = "gpucon-audit-read"):
        self.url = url
        self.timeout_s = timeout_s
        self.client_name = client_name
        self._client: object | None = None
        self._lock = threading.Lock()

    def read(self, limit: int) -> list[AuditRecord]:
        """The newest ``limit`` stream records, oldest first; raises when Redis cannot answer."""
        from gpucon.controls.registry import read_audit_stream

        with self._lock:
            if self._client is None:
                import redis

                self._client = redis.Redis.from_url(
                    self.url,
                    decode_responses=True,
                    socket_timeout=self.timeout_s,
                    socket_connect_timeout=self.timeout_s,
                    client_name=self.client_name,
                )
            client = self._client
        rows = read_audit_stream(client, limit)
        return records_from_rows(rows)

    def close(self) -> None:
        with self._lock:
            client, self._client = self._client, None
        close = getattr(client, "close", None)
        if close is not None:
            close()


class AuditStream(Protocol):
    """What the audit screen reads the shared stream through (from a worker thread)."""

    def read(self, limit: int) -> list[AuditRecord]: ...

    def close(self) -> None: ...


class RegistryAuditStream:
    """The stream read through a live console's registry control (its connection, its
    timeouts); used when the console knows its registry but not its config."""

    def __init__(self, registry: Any) -> None:
        self.registry = registry

    def read(self, limit: int) -> list[AuditRecord]:
        return records_from_rows(self.registry.read_audit(limit))

    def close(self) -> None:
        """The registry belongs to the controls; they close it."""


def format_record(record: AuditRecord) -> str:
    """One line of the audit log as plain text (the CLI and the audit screen)."""
    from gpucon.actions.plan import format_ts

    parts: Iterable[str] = (
        format_ts(record.ts),
        record.operator,
        record.event,
        record.action,
        record.target,
        record.step,
        record.status,
        record.text,
        f"[{record.digest}]" if record.digest else "",
    )
    return "  ".join(p for p in parts if p)
