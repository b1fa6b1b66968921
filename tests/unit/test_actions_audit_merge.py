"""merge_audit: the file's and the stream's records by time, each once, marked with its origin."""

from __future__ import annotations

from gpucon.actions.audit import ORIGIN_BOTH, ORIGIN_FILE, ORIGIN_STREAM, merge_audit
from gpucon.controls.audit_log import AuditRecord


def rec(ts: float, operator: str = "ann@h1", event: str = "intent") -> AuditRecord:
    return AuditRecord(ts, operator, event, "drain", "b1", "d")


def test_merged_by_time_own_records_once_others_marked() -> None:
    local = [rec(1.0), rec(3.0), rec(3.0, event="outcome")]
    stream = [rec(2.0, "bob@h2"), rec(3.0), rec(3.0, event="outcome"), rec(4.0, "bob@h2")]
    got = [(e.record.ts, e.record.operator, e.origin) for e in merge_audit(local, stream)]
    assert got == [
        (1.0, "ann@h1", ORIGIN_FILE),
        (2.0, "bob@h2", ORIGIN_STREAM),
        (3.0, "ann@h1", ORIGIN_BOTH),
        (3.0, "ann@h1", ORIGIN_BOTH),
        (4.0, "bob@h2", ORIGIN_STREAM),
    ]


def test_two_equal_records_in_the_file_match_one_stream_copy_each() -> None:
    # the same record twice in the file (two runs in one second) and once in the stream
    got = merge_audit([rec(1.0), rec(1.0)], [rec(1.0)])
    assert sorted(e.origin for e in got) == sorted([ORIGIN_BOTH, ORIGIN_FILE])


def test_limit_keeps_the_newest_of_both() -> None:
    local = [rec(float(t)) for t in range(0, 10, 2)]
    stream = [rec(float(t), "bob@h2") for t in range(1, 10, 2)]
    got = merge_audit(local, stream, limit=3)
    assert [e.record.ts for e in got] == [7.0, 8.0, 9.0]
    assert merge_audit([], [], limit=3) == []
