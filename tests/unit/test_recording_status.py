"""The REC badge's words: the file and size, behind (waiting, dropped), failed."""

from __future__ import annotations

from pathlib import Path

from gpucon.recording.status import BEHIND_AT, LOG_SHOWN_AT, RecordingStatus


def test_the_badge_says_how_the_recording_goes() -> None:
    ok = RecordingStatus("night.sqlite", 12_900_000, 0, 0, None)
    assert ok.state == "ok" and ok.badge() == "REC night.sqlite 12.3 MiB"
    behind = RecordingStatus("night.sqlite", 2048, BEHIND_AT, 0, None)
    assert behind.badge() == f"REC BEHIND night.sqlite 2 KiB ({BEHIND_AT} waiting)"
    # a snapshot dropped once: the file has a gap, said from then on
    dropped = RecordingStatus("night.sqlite", 2048, 0, 5, None)
    assert dropped.state == "behind" and "5 dropped" in dropped.badge()
    failed = RecordingStatus(
        "night.sqlite", 3 << 30, 0, 0, "recording stopped: disk full", reason="disk full"
    )
    assert failed.badge() == "REC FAILED night.sqlite at 3.0 GiB: disk full"
    # a file that could not be opened for writing: nothing recorded, the OS's reason said
    never = RecordingStatus(
        "night.sqlite",
        0,
        0,
        0,
        "cannot record to /srv/rec/night.sqlite: No such file or directory (ENOENT)",
        reason="No such file or directory",
        started=False,
    )
    assert never.state == "failed"
    assert never.badge() == "REC FAILED night.sqlite: No such file or directory"


def test_a_write_ahead_log_that_grows_past_its_usual_size_is_said() -> None:
    usual = RecordingStatus("night.sqlite", 252 << 10, 0, 0, None, log_bytes=4 << 20)
    assert usual.badge() == "REC night.sqlite 252 KiB"
    held = RecordingStatus("night.sqlite", 252 << 10, 0, 0, None, log_bytes=LOG_SHOWN_AT + 1)
    assert held.badge() == "REC night.sqlite 252 KiB +8.0 MiB log"


def test_the_badge_counts_the_recording_not_sqlite_s_log(tmp_path: Path) -> None:
    """Twenty seconds of the demo recorded by the real recorder into a real SQLite file: the
    badge's size is what the file holds once closed, not the file and its write-ahead log
    (then several times as much, for the same frames)."""
    from gpucon.hub import Hub
    from gpucon.recording.recorder import Recorder, wait_written
    from gpucon.session.record import FrozenClock
    from gpucon.sim.source import SimSource

    clock = FrozenClock(1_790_000_000.0)
    hub = Hub([SimSource.for_demo(7, None, None, clock=clock)], refresh_s=1.0, clock=clock)
    path = tmp_path / "night.sqlite"
    recorder = Recorder(path, fleet="demo", refresh_s=1.0, block=True)
    hub.subscribe(recorder)
    try:
        for _ in range(20):
            hub.poll_once()
            hub.tick()
            clock.now += 1.0
        assert wait_written(recorder, 20)
        status = recorder.status()
        log = path.with_name(path.name + "-wal").stat().st_size
        assert status.log_bytes == log
        on_disk = path.stat().st_size + log
        assert on_disk > 3 * status.size_bytes  # what the badge used to say
        assert status.badge() == f"REC night.sqlite {status.size_bytes / 1024:.0f} KiB"
    finally:
        recorder.close()
    assert not path.with_name(path.name + "-wal").exists()  # folded into the file on close
    assert path.stat().st_size == status.size_bytes  # the size the badge said
