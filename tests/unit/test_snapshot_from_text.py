"""``gpucon snapshot --from FILE`` as text: a backend whose model has no SLO of its own is
held to the config's default SLO, as the live snapshot and the replay show it, and a fleet
with no GPU source says where its slots come from instead of an empty slot table."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import msgspec
import pytest

from gpucon.commands.cli import main
from gpucon.recording.recorder import Recorder, wait_written
from tests.unit.test_recording_frames import _live


def _record(path: Path, *, slots: bool) -> None:
    recorder = Recorder(path, fleet="demo", refresh_s=1.0)
    try:
        for snap in _live(None, 2):
            # no SLO of any model's own; no GPU source read (slots known from the backends)
            changed = msgspec.structs.replace(
                snap, slo_p95_ms={}, **({} if slots else {"slots": {}})
            )
            recorder(changed)
        assert wait_written(recorder, 2)
    finally:
        recorder.close()


@pytest.fixture
def recorded_text(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> Callable[[bool], str]:
    """``gpucon snapshot --from`` of a recording (with or without a GPU source), as printed
    with no config (the default SLO, 2500 ms)."""
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    for name in ("GPUCON_CONFIG", "GPUCON_FLEET"):
        monkeypatch.delenv(name, raising=False)

    def text(slots: bool) -> str:
        path = tmp_path / f"night-{slots}.sqlite"
        _record(path, slots=slots)
        assert main(["snapshot", "--from", str(path)]) == 0
        return capsys.readouterr().out

    return text


def test_recorded_backends_are_held_to_the_default_slo(
    recorded_text: Callable[[bool], str],
) -> None:
    out = recorded_text(True)
    rows = [line for line in out.splitlines() if line.startswith("sd")]
    assert rows and all("/2500" in line for line in rows if " active " in line)
    assert "no GPU source read" not in out


def test_slots_known_only_from_the_backends_are_said_so(
    recorded_text: Callable[[bool], str],
) -> None:
    out = recorded_text(False)
    header = out.splitlines()[0]
    known = int(header.split(" slots")[0].rsplit(" ", 1)[1])
    assert known > 0
    assert f"(no GPU source read: the {known} slots are the backends' below)" in out
