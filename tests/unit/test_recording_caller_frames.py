"""The recorder builds each delta on its caller's thread (the hub's, right after its tick) and
writes to the disk on its own: a keyframe, and what arrives while one waits unframed, is built
on the writer thread, in order; a slow disk makes the caller drop fresh snapshots, never wait,
and every frame written reads back as the snapshot it was made from."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import pytest

from gpucon.model.snapshot import Snapshot
from gpucon.recording import recorder as recorder_module
from gpucon.recording.cursor import ReplayCursor
from gpucon.recording.recorder import Recorder, wait_written
from gpucon.recording.store import RecordingStore
from tests.unit.test_recording_frames import _live
from tests.unit.test_recording_whole_rows import _same_fleet


def _spy_threads(recorder: Recorder) -> dict[str, list[threading.Thread]]:
    """Which thread built each keyframe and each delta."""
    seen: dict[str, list[threading.Thread]] = {"keyframe": [], "delta": []}
    blobs = recorder._blobs
    for name in seen:
        made = getattr(blobs, name)

        def spy(frame: dict[str, Any], made: Any = made, name: str = name) -> bytes:
            seen[name].append(threading.current_thread())
            out: bytes = made(frame)
            return out

        setattr(blobs, name, spy)
    return seen


def _watched(
    tmp_path: Path, ticks: int, **options: Any
) -> tuple[list[Snapshot], Path, Recorder, dict[str, list[threading.Thread]]]:
    """The noisy neighbour's first ``ticks`` snapshots, a recorder with its frames' threads
    watched, and its file."""
    live = _live("noisy-neighbour", ticks)
    path = tmp_path / "r.sqlite"
    recorder = Recorder(path, fleet="demo", refresh_s=1.0, **options)
    return live, path, recorder, _spy_threads(recorder)


def _reads_back(path: Path, live: list[Snapshot]) -> list[float]:
    """Every frame in the file is exactly the snapshot of its time; the frames' times."""
    by_t = {s.taken_at: s for s in live}
    store = RecordingStore(path, readonly=True)
    try:
        cursor = ReplayCursor(store)
        span = store.span()
        assert span is not None
        times = store.times(span[0], span[1])
        for t in times:
            back = cursor.seek(t)
            assert back is not None
            _same_fleet(back, by_t[t])
    finally:
        store.close()
    return times


def test_deltas_are_built_on_the_caller_s_thread_keyframes_on_the_writer_s(
    tmp_path: Path,
) -> None:
    live, path, recorder, seen = _watched(tmp_path, 12, keyframe_s=5.0)
    try:
        for i, snapshot in enumerate(live):
            recorder(snapshot)
            assert wait_written(recorder, i + 1)
    finally:
        recorder.close()
    assert len(seen["keyframe"]) == 3 and len(seen["delta"]) == 9
    assert set(seen["keyframe"]) == {recorder._thread}
    assert set(seen["delta"]) == {threading.current_thread()}
    assert _reads_back(path, live) == [s.taken_at for s in live]


def test_what_arrives_behind_an_unframed_keyframe_is_framed_after_it_in_order(
    tmp_path: Path,
) -> None:
    live, path, recorder, seen = _watched(tmp_path, 12, keyframe_s=5.0)
    gate = threading.Event()
    keyframe = recorder._blobs.keyframe

    def held(frame: dict[str, Any]) -> bytes:
        gate.wait(10)  # the keyframe is built once the test lets it
        return keyframe(frame)

    recorder._blobs.keyframe = held  # type: ignore[method-assign]
    try:
        for snapshot in live[:3]:
            recorder(snapshot)  # the keyframe waits: these two are queued behind it unframed
        gate.set()
        assert wait_written(recorder, 3)
        for snapshot in live[3:]:
            recorder(snapshot)
    finally:
        recorder.close()
    assert seen["delta"][:2] == [recorder._thread] * 2
    assert recorder.frames_written == 12 and recorder.dropped == 0
    assert _reads_back(path, live) == [s.taken_at for s in live]


def test_a_stuck_disk_drops_fresh_snapshots_and_never_holds_the_caller(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(recorder_module, "QUEUE_LIMIT", 4)
    live, path, recorder, seen = _watched(tmp_path, 30, keyframe_s=10.0)
    gate = threading.Event()
    append = recorder.store.append

    def stuck(*args: Any, **kwargs: Any) -> None:
        gate.wait(10)  # the disk answers nothing until the test lets it
        append(*args, **kwargs)

    recorder.store.append = stuck  # type: ignore[method-assign]
    try:
        recorder(live[0])
        while recorder._unframed:  # built on the writer thread, which then waits on the disk
            time.sleep(0.001)
        for snapshot in live[1:20]:
            recorder(snapshot)  # returns: a caller waiting here would hang the test
        assert recorder.frames_written == 0
        assert recorder.dropped == 20 - 5  # the queue's 4 and the keyframe at the disk
        assert recorder.status().waiting == 4
        assert seen["delta"] == [threading.current_thread()] * 4
        gate.set()  # the disk catches up; the recording goes on
        assert wait_written(recorder, 5)
        for i, snapshot in enumerate(live[20:]):
            recorder(snapshot)
            assert wait_written(recorder, 5 + i + 1)
    finally:
        gate.set()
        recorder.close()
    assert recorder.error is None
    times = _reads_back(path, live)  # deltas against the last frame built, not the dropped
    assert len(times) == recorder.frames_written == 30 - recorder.dropped
    assert times[-10:] == [s.taken_at for s in live[20:]]


def test_a_blocking_recorder_waits_for_room_and_drops_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(recorder_module, "QUEUE_LIMIT", 2)
    live = _live(None, 10)
    path = tmp_path / "r.sqlite"
    recorder = Recorder(path, fleet="demo", refresh_s=1.0, block=True)
    append = recorder.store.append
    waited = threading.Event()

    def slow(*args: Any, **kwargs: Any) -> None:
        waited.wait(0.02)
        append(*args, **kwargs)

    recorder.store.append = slow  # type: ignore[method-assign]
    try:
        for snapshot in live:
            recorder(snapshot)
    finally:
        recorder.close()
    assert recorder.dropped == 0 and recorder.frames_written == 10
    assert _reads_back(path, live) == [s.taken_at for s in live]
