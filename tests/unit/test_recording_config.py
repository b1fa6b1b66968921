"""``[record]`` in the config: its limits are validated with the field named, and reach the
recorder; ``--record`` on the console wires a recorder to the session's hub."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from gpucon.commands.cli import build_parser
from gpucon.config import ConfigError, RecordConfig, load_config
from gpucon.recording.recorder import wait_written
from gpucon.recording.store import RecordingStore

FLEET = '[fleets.x.redis]\nurl = "redis://127.0.0.1:1/0"\n'


def _load(tmp_path: Path, text: str) -> RecordConfig:
    path = tmp_path / "config.toml"
    path.write_text(FLEET + text)
    return load_config(path, env={}).record


def test_record_limits_are_read_and_default(tmp_path: Path) -> None:
    assert _load(tmp_path, "") == RecordConfig()
    got = _load(tmp_path, "[record]\nkeyframe_s = 30\nmax_mib = 200\nmax_age_h = 12\n")
    assert got == RecordConfig(keyframe_s=30.0, max_mib=200.0, max_age_h=12.0)


@pytest.mark.parametrize(
    ("text", "field"),
    [
        ("keyframe_s = 0.1", "record.keyframe_s"),
        ("keyframe_s = 7200", "record.keyframe_s"),
        ("max_mib = 0", "record.max_mib"),
        ("max_mib = 'big'", "record.max_mib"),
        ("max_age_h = -1", "record.max_age_h"),
        ("max_age_h = nan", "record.max_age_h"),
        ("rotate = true", "record.rotate"),
    ],
)
def test_a_bad_record_limit_is_refused_by_name(tmp_path: Path, text: str, field: str) -> None:
    with pytest.raises(ConfigError, match=field.replace(".", r"\.")):
        _load(tmp_path, f"[record]\n{text}\n")


def test_the_demo_with_record_subscribes_a_recorder(tmp_path: Path) -> None:
    from gpucon.commands import console
    from gpucon.config import GpuconConfig

    path = tmp_path / "demo.sqlite"
    argv = ["demo", "--record", str(path), "--size", "16"]
    args: argparse.Namespace = build_parser(argv).parse_args(argv)
    from gpucon.recording.recorder import Recorder

    session, recorder = console._open(args, GpuconConfig(), 1.0)
    assert isinstance(recorder, Recorder)  # not NotRecording: the file could be written
    try:
        session.hub.tick()  # the primed first frame is recorded too (the recorder came first)
        assert wait_written(recorder, 1)
    finally:
        session.close()
        recorder.close()
    store = RecordingStore(path, readonly=True)
    assert store.meta()["fleet"] == "simulated seed=7 size=16"
    assert store.span() is not None
    store.close()


def test_replay_keys_collide_with_the_app_s_not_with_the_actions() -> None:
    from gpucon.config.keys import key_collisions

    [problem] = key_collisions({"replay_speed": "q"})
    assert "collides with quit" in problem
    # no action key exists in a replay: drain may take a replay key's letter
    assert key_collisions({"drain": "x"}) == []
