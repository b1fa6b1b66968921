"""The REC badge's words: the file and size, behind (waiting, dropped), failed."""

from __future__ import annotations

from gpucon.recording.status import BEHIND_AT, RecordingStatus


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
