"""The audit log: one JSON line per action event, and the Redis stream ``gpucon:audit``.

Events of one action run, in order: ``intent`` (before the first step), one ``step`` per step
result, then ``outcome``; ``refused`` stands alone when the action never started (lock held,
failed precondition). Every record carries the time, the operator (user@host), the action,
the target and the plan's digest. The file is the record of this operator's console; the
stream (written through the registry control) is the fleet's shared record.
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from gpucon.actions.plan import JsonValue

AUDIT_EVENTS = ("intent", "step", "outcome", "refused")


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
        def text(key: str) -> str:
            value = raw.get(key, "")
            return "" if value is None else str(value)

        try:
            ts = float(raw.get("ts", 0.0))
        except (TypeError, ValueError):
            ts = 0.0
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
                keep.append(AuditRecord.from_dict(raw))
    return list(keep)


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
