"""Reading the audit trail: this console's JSONL file and the fleet's ``gpucon:audit`` stream.

Events of one action run, in order: ``intent`` (before the first step), one ``step`` per step
result, then ``outcome``; ``refused`` stands alone when the action never started (lock held,
failed precondition). Every record carries the time, the fleet, the operator (user@host), the
action, the target and the plan's digest. The file is the record of this operator's console;
the stream (written through the registry control) is the fleet's shared record.

An intent with no outcome after it is a run that never finished: ``interrupted`` (the process
was killed, the machine went away) unless its target's lock is still held by the same operator
(``running``): ``run_statuses`` says which, for the CLI and the audit screen alike.
"""

from __future__ import annotations

import contextlib
import json
import threading
from collections import deque
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from gpucon.controls.audit_log import AuditRecord
from gpucon.errors import JsonValue
from gpucon.sources.connect import RedisAuth


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

    def __init__(
        self,
        url: str,
        timeout_s: float,
        client_name: str = "gpucon-audit-read",
        auth: RedisAuth | None = None,
    ):
        self.url = url
        self.auth = auth
        self.timeout_s = timeout_s
        self.client_name = client_name
        self._client: object | None = None
        self._lock = threading.Lock()

    def read(self, limit: int) -> list[AuditRecord]:
        """The newest ``limit`` stream records, oldest first; raises when Redis cannot answer."""
        from gpucon.controls.registry import read_audit_stream

        rows = read_audit_stream(self._connect(), limit)
        return records_from_rows(rows)

    def lock_holder(self, target: str) -> str | None:
        """Who holds ``target``'s lock now (a read; raises when Redis cannot answer)."""
        return lock_holders(self._connect())(target)

    def _connect(self) -> Any:
        with self._lock:
            if self._client is None:
                from gpucon.sources.connect import redis_client

                self._client = redis_client(
                    self.url, self.auth, timeout_s=self.timeout_s, client_name=self.client_name
                )
            return self._client

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

    def lock_holder(self, target: str) -> str | None:
        """Who holds ``target``'s lock now, read over the registry's connection."""
        client = getattr(self.registry, "client", None)
        return None if client is None else lock_holders(client)(target)

    def close(self) -> None:
        """The registry belongs to the controls; they close it."""


INTERRUPTED = "interrupted"
RUNNING = "running"


def _run_key(record: AuditRecord) -> tuple[str, ...]:
    return (record.fleet, record.operator, record.action, record.target, record.digest)


def unfinished_intents(records: Sequence[AuditRecord]) -> set[int]:
    """Indexes of the intents with no outcome after them (same fleet, operator, action, target
    and plan). An outcome closes the latest open intent: runs of one plan on one target follow
    each other under its lock, so a killed run stays open behind the rerun that finished."""
    open_runs: dict[tuple[str, ...], list[int]] = {}
    for i, record in enumerate(records):
        if record.event == "intent":
            open_runs.setdefault(_run_key(record), []).append(i)
        elif record.event == "outcome":
            waiting = open_runs.get(_run_key(record))
            if waiting:
                waiting.pop()
    return {i for waiting in open_runs.values() for i in waiting}


LockHolder = Callable[[str], str | None]  # target -> who holds its lock now (None: nobody)


def run_statuses(records: Sequence[AuditRecord], holder: LockHolder | None = None) -> list[str]:
    """The status to show for each record: its own, except an unfinished intent, which is
    ``running`` while its operator still holds the target's lock and ``interrupted``
    otherwise (``holder`` None: the locks cannot be read, so every unfinished intent reads
    interrupted)."""
    statuses = [r.status for r in records]
    for i in sorted(unfinished_intents(records)):
        held_by = None
        if holder is not None:
            try:
                held_by = holder(records[i].target)
            except Exception:  # no lock information (Redis down): ask no more, say interrupted
                holder = None
        statuses[i] = RUNNING if held_by == records[i].operator else INTERRUPTED
    return statuses


def lock_holders(client: Any) -> LockHolder:
    """Reads who holds a target's lock (``GET gpucon:lock:TARGET``, a read), for
    ``run_statuses``; the value names its holder."""
    from gpucon.registry.keys import lock_key

    def holder(target: str) -> str | None:
        raw = client.get(lock_key(target))
        if raw is None:
            return None
        text = raw.decode(errors="replace") if isinstance(raw, bytes) else str(raw)
        try:
            info = json.loads(text)
        except json.JSONDecodeError:
            return text
        return str(info.get("holder", "?")) if isinstance(info, dict) else text

    return holder


def format_record(record: AuditRecord, status: str | None = None) -> str:
    """One line of the audit log as plain text (the CLI); ``status`` replaces the record's
    (an unfinished intent's ``interrupted``). A record without a fleet shows ``?``."""
    from gpucon.errors import format_ts

    parts: Iterable[str] = (
        format_ts(record.ts),
        record.fleet or "?",
        record.operator,
        record.event,
        record.action,
        record.target,
        record.step,
        record.status if status is None else status,
        record.text,
        f"[{record.digest}]" if record.digest else "",
    )
    return "  ".join(p for p in parts if p)
