"""``--alerts-only``'s re-run keeps the slots' memory growth runs as the hub does, and finds
exactly the alerts the walk back through the history finds, at the times the live run had."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpucon.model.alerts import AlertThresholds
from gpucon.recording.frames import FrameState
from gpucon.recording.rerun import rerun_alerts
from gpucon.recording.store import RecordingStore
from gpucon.session import DemoOptions
from gpucon.session.record import record_simulated


def _spans(path: Path) -> list[tuple[str, float, float | None]]:
    store = RecordingStore(path, readonly=True)
    try:
        result = rerun_alerts(store, AlertThresholds())
    finally:
        store.close()
    return [(s.key, s.start, s.end) for s in result.fired]


def test_the_memory_trend_rule_fires_as_live_with_or_without_the_growth_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "leak.sqlite"
    record_simulated(
        path, seconds=150, demo=DemoOptions(7, "slice-memory-leak", None), keyframe_s=30.0
    )
    store = RecordingStore(path, readonly=True)
    recorded = [(s.key, s.start, s.end) for s in store.alert_spans()]
    store.close()
    assert any(k.startswith("memory_trend:") for k, _, _ in recorded), recorded
    with_runs = _spans(path)
    # the live hub's alerts, from the same frames (the same thresholds; a recording closes
    # the alerts still on at its last frame, a re-run leaves them open)
    assert sorted((k, start) for k, start, _ in with_runs) == sorted(
        (k, start) for k, start, _ in recorded
    )
    # without the recorded columns the rule walks each slot's history back: the same alerts
    monkeypatch.setattr(FrameState, "family", lambda self, kind, series: None)
    assert _spans(path) == with_runs
