"""``gpucon record`` as a real process: killed with SIGKILL it leaves a file that opens and
replays up to the last second; SIGTERM stops it cleanly; replay and snapshot read the file."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from gpucon.recording.cursor import ReplayCursor
from gpucon.recording.store import RecordingStore

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]


def _env(tmp_path: Path) -> dict[str, str]:
    env = dict(os.environ)
    env.update(
        PYTHONPATH=str(ROOT),
        XDG_CONFIG_HOME=str(tmp_path / "config"),
        XDG_STATE_HOME=str(tmp_path / "state"),
    )
    return {k: v for k, v in env.items() if not k.startswith("GPUCON_")}


def _gpucon(*args: str) -> list[str]:
    return [sys.executable, "-m", "gpucon.commands.cli", *args]


def _frames(path: Path) -> list[float]:
    """The frame times another process has committed so far (read as a separate reader)."""
    if not path.exists():
        return []
    try:
        db = sqlite3.connect(f"{path.as_uri()}?mode=ro", uri=True, timeout=1.0)
        try:
            return [float(r[0]) for r in db.execute("SELECT t FROM frames ORDER BY t")]
        finally:
            db.close()
    except sqlite3.Error:  # the writer is creating its tables
        return []


def _start(tmp_path: Path, path: Path, frames: int) -> subprocess.Popen[bytes]:
    proc = subprocess.Popen(
        _gpucon("record", str(path), "--demo", "--scenario", "noisy-neighbour"),
        env=_env(tmp_path),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    deadline = time.monotonic() + 60
    while len(_frames(path)) < frames:
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, "no frames written"
        time.sleep(0.1)
    return proc


def test_kill_9_loses_at_most_the_last_second(tmp_path: Path) -> None:
    path = tmp_path / "night.sqlite"
    proc = _start(tmp_path, path, frames=4)
    # just after a frame is committed, and again mid-way to the next: the worst case is a
    # kill just before a commit, which loses that one tick
    seen = len(_frames(path))
    deadline = time.monotonic() + 10
    while len(_frames(path)) == seen and time.monotonic() < deadline:
        time.sleep(0.02)
    time.sleep(0.5)
    committed = _frames(path)
    killed_at = time.time()
    proc.send_signal(signal.SIGKILL)
    proc.wait(10)
    assert proc.returncode == -signal.SIGKILL
    store = RecordingStore(path, readonly=True)
    try:
        span = store.span()
        assert span is not None
        # nothing committed is lost, and at most the tick being written is: the newest frame
        # is within one tick of the kill (the demo ticks once a second; a starved machine's
        # ticks are as far apart as its last two frames)
        times = store.times(span[0], span[1])
        assert times[: len(committed)] == committed
        cadence = max(1.0, times[-1] - times[-2])
        assert killed_at - span[1] <= cadence + 0.5, (killed_at - span[1], cadence)
        cursor = ReplayCursor(store)
        assert cursor.seek(span[1]) is not None
        snapshot = cursor.fill_history()
        assert snapshot is not None and snapshot.taken_at == span[1]
        assert len(snapshot.slots) == 9
        assert len(snapshot.history.times) == len(store.times(span[0], span[1]))
    finally:
        store.close()
    # and the command line reads it too: the fleet at its last second
    out = subprocess.run(
        _gpucon("snapshot", "--from", str(path), "--json"),
        env=_env(tmp_path),
        capture_output=True,
        timeout=60,
        check=True,
    )
    assert json.loads(out.stdout)["taken_at"] == span[1]


def test_sigterm_stops_the_recorder_cleanly(tmp_path: Path) -> None:
    path = tmp_path / "night.sqlite"
    proc = _start(tmp_path, path, frames=3)
    proc.send_signal(signal.SIGTERM)
    _out, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err
    assert b"stopped;" in err and b"frames written" in err
    # the log was checkpointed into the file: it is one file again
    assert not Path(f"{path}-wal").exists() or Path(f"{path}-wal").stat().st_size == 0
    store = RecordingStore(path, readonly=True)
    try:
        span = store.span()
        assert span is not None and len(store.times(span[0], span[1])) >= 3
        assert all(a.end is not None for a in store.alert_spans())  # closed at the stop
    finally:
        store.close()


def test_replay_alerts_only_and_snapshot_at_a_time(tmp_path: Path) -> None:
    example = ROOT / "examples" / "noisy-neighbour.recording.sqlite"
    out = subprocess.run(
        _gpucon("replay", str(example), "--alerts-only"),
        env=_env(tmp_path),
        capture_output=True,
        timeout=120,
        text=True,
    )
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert "over 180 frames with the current thresholds" in lines[0]
    assert any("CRIT  sdxl-vm-b-1  p95" in line and "as recorded" in line for line in lines)
    # a stricter threshold: the p95 rule no longer fires, and the command says so
    config = tmp_path / "strict.toml"
    config.write_text(
        '[fleets.x.redis]\nurl = "redis://127.0.0.1:1/0"\n[slo]\nsdxl = 60000\n'
        "[alerts]\np95_near_slo_pct = 99\n"
    )
    out = subprocess.run(
        _gpucon("replay", str(example), "--alerts-only", "--config", str(config), "--json"),
        env=_env(tmp_path),
        capture_output=True,
        timeout=120,
        text=True,
    )
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    assert "p95_slo:sdxl-vm-b-1" in {a["key"] for a in doc["no_longer_fire"]}
    assert "p95_slo:sdxl-vm-b-1" not in {a["key"] for a in doc["fired"]}
    # the fleet 30 s in, by an offset from the start
    out = subprocess.run(
        _gpucon("snapshot", "--from", str(example), "--at", "+30", "--json"),
        env=_env(tmp_path),
        capture_output=True,
        timeout=60,
        text=True,
    )
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    assert doc["taken_at"] == 1_790_000_030.0 and len(doc["slots"]) == 9
    bad = subprocess.run(
        _gpucon("snapshot", "--from", str(example), "--at", "yesterday"),
        env=_env(tmp_path),
        capture_output=True,
        timeout=60,
        text=True,
    )
    assert bad.returncode == 2 and "--at: expected epoch seconds" in bad.stderr
