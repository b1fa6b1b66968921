"""Writing the audit trail: one JSON line per action event, and the fleet's shared stream.

Events of one action run, in order: ``intent`` (before the first step), one ``step`` per step
result, then ``outcome``; ``refused`` stands alone when the action never started (lock held,
failed precondition). Every record carries the time, the fleet it acted on (the config's
fleet name, or ``simulated`` for the demo), the operator (user@host), the action, the target
and the plan's digest. The file is the record of this operator's console; the stream
(``gpucon:audit``, written through the registry control) is the fleet's shared record. The
demo writes its own file and no stream, so its actions never reach a live fleet's record.
Reading and merging the two is ``gpucon.actions.audit``'s.
"""

from __future__ import annotations

import json
import math
import os
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from gpucon.errors import JsonValue
from gpucon.redact import redact

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
    fleet: str = ""  # "" in records written before records named their fleet

    def __post_init__(self) -> None:
        # written to a file and a shared stream, read back by every console: the texts a
        # step's error quoted lose their credentials here, whoever built the record
        for name in ("operator", "action", "target", "status", "step", "text", "fleet"):
            value = getattr(self, name)
            if isinstance(value, str) and value:
                object.__setattr__(self, name, redact(value))

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
            "fleet": self.fleet,
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
            fleet=text("fleet"),
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
        *,
        fleet: str = "",
    ) -> None:
        self.path = path
        self.stream = stream
        self.fleet = fleet  # named in every record
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
                self.stream_errors.append(
                    redact(
                        f"the fleet's audit stream missed the {record.event} record "
                        f"({type(exc).__name__}: {exc}); {self.path} has it"
                    )
                )

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
        rec = AuditRecord(
            self.clock(), operator, event, action, target, digest, status, step, text, self.fleet
        )
        self.write(rec)
        return rec
