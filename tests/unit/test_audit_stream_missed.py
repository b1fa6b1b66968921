"""A record the fleet's audit stream could not take says which, and where it was kept."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from gpucon.actions.audit import read_audit
from gpucon.controls.audit_log import AuditLog
from gpucon.errors import JsonValue


def test_a_record_the_stream_missed_is_named_with_the_file_that_has_it(tmp_path: Path) -> None:
    def stopped_redis(_record: Mapping[str, JsonValue]) -> None:
        raise TimeoutError("Timeout reading from socket")

    path = tmp_path / "audit.jsonl"
    log = AuditLog(path, stopped_redis)
    log.record(operator="ann@h1", event="step", action="drain", target="b1", digest="d")
    assert log.stream_errors == [
        "the fleet's audit stream missed the step record (TimeoutError: Timeout reading from "
        f"socket); {path} has it"
    ]
    assert [r.event for r in read_audit(path)] == ["step"]
