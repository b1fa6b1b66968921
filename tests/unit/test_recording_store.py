"""The recording file: the recorder writes it off the caller's thread, keeps it within its caps,
refuses another fleet's file, notes alerts and copies the audit records of the period."""

from __future__ import annotations

import json
import sqlite3
import threading
from pathlib import Path

import pytest

from gpucon.recording.cursor import ReplayCursor
from gpucon.recording.recorder import Recorder, wait_written
from gpucon.recording.store import RecordingError, RecordingStore
from gpucon.session import DemoOptions
from gpucon.session.record import record_simulated

NOISY = DemoOptions(7, "noisy-neighbour", None)


def test_the_recorder_writes_in_its_own_thread(tmp_path: Path) -> None:
    seen: list[str] = []
    recorder = record_simulated(
        tmp_path / "r.sqlite", seconds=5, demo=NOISY, on_snapshot=lambda s: seen.append("x")
    )
    assert recorder.frames_written == 5 == len(seen)
    assert recorder._thread.name == "gpucon-recorder"
    assert recorder._thread is not threading.current_thread()
    store = RecordingStore(tmp_path / "r.sqlite", readonly=True)
    span = store.span()
    assert span == (1_790_000_000.0, 1_790_000_004.0)
    assert store.meta()["fleet"] == "simulated seed=7 size=default"
    store.close()


def test_alerts_are_noted_with_their_start_and_end(tmp_path: Path) -> None:
    path = tmp_path / "r.sqlite"
    record_simulated(path, seconds=60, demo=NOISY)
    store = RecordingStore(path, readonly=True)
    spans = store.alert_spans()
    assert spans, "the noisy neighbour raises alerts"
    cursor = ReplayCursor(store)
    for span in spans:
        snapshot = cursor.seek(span.start)
        assert snapshot is not None and span.key in {a.key for a in snapshot.alerts}
        before = cursor.seek(span.start - 1.0)
        assert before is not None and span.key not in {a.key for a in before.alerts}
    store.close()


def test_the_size_cap_drops_the_oldest_keyframe_groups(tmp_path: Path) -> None:
    path = tmp_path / "r.sqlite"
    record_simulated(path, seconds=60, demo=NOISY, keyframe_s=5.0)
    store = RecordingStore(path)
    full = store.size_bytes()
    span = store.span()
    assert span is not None
    store.prune(max_bytes=full // 2, min_t=0.0)
    span_after = store.span()
    assert span_after is not None and span_after[0] > span[0]
    assert span_after[1] == span[1]  # the newest frames stay
    assert store.size_bytes() <= full // 2
    # what is left starts with a keyframe: it still replays from its first frame
    snapshot = ReplayCursor(store).seek(span_after[0])
    assert snapshot is not None and snapshot.taken_at == span_after[0]
    store.close()


def test_the_recorder_keeps_its_file_under_the_size_cap(tmp_path: Path) -> None:
    path = tmp_path / "r.sqlite"
    record_simulated(path, seconds=90, demo=NOISY, keyframe_s=5.0, max_bytes=40_000)
    store = RecordingStore(path, readonly=True)
    span = store.span()
    assert span is not None and span[0] > 1_790_000_000.0 and span[1] == 1_790_000_089.0
    assert store.size_bytes() <= 40_000 + 16_000  # the cap, and the newest group over it
    store.close()


def test_the_age_cap_drops_frames_older_than_it(tmp_path: Path) -> None:
    path = tmp_path / "r.sqlite"
    record_simulated(path, seconds=30, demo=NOISY, keyframe_s=10.0)
    store = RecordingStore(path)
    store.prune(max_bytes=1 << 40, min_t=1_790_000_000.0 + 15.0)
    span = store.span()
    assert span is not None and span[0] == 1_790_000_010.0  # the group holding t=15 stays
    store.close()


def test_another_fleet_s_file_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "r.sqlite"
    record_simulated(path, seconds=2, demo=NOISY)
    with pytest.raises(RecordingError, match="records fleet 'simulated seed=7 size=default'"):
        Recorder(path, fleet="prod", refresh_s=1.0)


def test_a_file_that_is_not_a_recording_is_refused(tmp_path: Path) -> None:
    junk = tmp_path / "junk.sqlite"
    junk.write_bytes(b"not a database at all" * 100)
    with pytest.raises(RecordingError, match="not a gpucon recording"):
        RecordingStore(junk, readonly=True)
    other = tmp_path / "other.sqlite"
    db = sqlite3.connect(other)
    db.execute("CREATE TABLE t (x)")
    db.commit()
    db.close()
    with pytest.raises(RecordingError, match="not a gpucon recording"):
        RecordingStore(other, readonly=True)
    with pytest.raises(RecordingError, match="no such recording"):
        RecordingStore(tmp_path / "missing.sqlite", readonly=True)


def test_audit_records_written_while_recording_are_kept(tmp_path: Path) -> None:
    from gpucon.hub import Hub
    from gpucon.sim.source import SimSource
    from tests.ui.fleet_fixture import FrozenClock

    audit = tmp_path / "audit.jsonl"
    audit.write_text(json.dumps({"ts": 1.0, "event": "intent", "action": "old"}) + "\n")
    clock = FrozenClock(1_790_000_000.0)
    hub = Hub([SimSource.for_demo(7, None, None, clock=clock)], clock=clock)
    recorder = Recorder(tmp_path / "r.sqlite", fleet="f", refresh_s=1.0, audit_path=audit)
    hub.subscribe(recorder)
    hub.poll_once()
    hub.tick()
    assert wait_written(recorder, 1)
    record = {"ts": clock.now, "event": "intent", "action": "drain", "target": "b1"}
    with audit.open("a") as fh:
        fh.write(json.dumps(record) + "\n")
        fh.write('{"ts": 5, "event": "half a li')  # still being written: not taken yet
    clock.now += 1.0
    hub.tick()
    assert wait_written(recorder, 2)
    recorder.close()
    store = RecordingStore(tmp_path / "r.sqlite", readonly=True)
    lines = [json.loads(line) for line in store.audit_lines()]
    store.close()
    assert [r["action"] for r in lines] == ["drain"]  # not the one from before the recording
