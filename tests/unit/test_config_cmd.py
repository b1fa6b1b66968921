"""``gpucon config check``: effective values with their origin; bad config exits non-zero."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpucon.commands.cli import main
from gpucon.config.env import SOURCE_VARIABLES

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "config.toml"


def test_check_prints_effective_values_and_origins(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GPUCON_REDIS_URL", "redis://10.9.9.9:6379/0")
    assert main(["config", "check", "--config", str(EXAMPLE), "--fleet", "vms"]) == 0
    out = capsys.readouterr().out
    assert "# opens fleet 'vms' (from --fleet)" in out
    assert "# -- fleet vms  (opens)" in out
    assert '"redis://10.9.9.9:6379/0"' in out and "# env GPUCON_REDIS_URL" in out
    assert 'uri       = "qemu:///system"' in out
    assert "# sources, in merge order: libvirt, redis" in out
    assert "#   libvirt: " in out
    assert "#   redis: ready (every 1s, timeout 2s)" in out
    assert out.rstrip().endswith("config OK")


def test_bad_config_exits_non_zero_naming_the_key(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text("[fleets.prod.redis]\ncadence_s = -1\n")
    assert main(["config", "check", "--config", str(bad)]) == 2
    err = capsys.readouterr().err
    assert f"{bad}: fleets.prod.redis.cadence_s: expected a number from 0.001 to 86,400" in err


def test_missing_config_exits_non_zero_and_offers_the_demo(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("GPUCON_CONFIG", *SOURCE_VARIABLES):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))
    assert main(["config", "check"]) == 2
    assert "gpucon demo" in capsys.readouterr().err


def test_gpucon_without_config_says_how_to_write_one(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("GPUCON_CONFIG", *SOURCE_VARIABLES):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))
    assert main([]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"gpucon: no gpucon config at {tmp_path}")
    assert "gpucon demo" in err


@pytest.mark.parametrize(
    ("toml", "expected"),
    [
        ('[keys]\nnonexistent = "x"\n', "keys.nonexistent: unknown binding id"),
        ('[ui]\ntheme = "nosuchtheme"\n', "ui.theme: unknown theme 'nosuchtheme'"),
    ],
)
def test_check_refuses_what_the_console_would_refuse(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], toml: str, expected: str
) -> None:
    bad = tmp_path / "ui.toml"
    bad.write_text('[fleets.prod.redis]\nurl = "redis://127.0.0.1:6379/0"\n' + toml)
    assert main(["config", "check", "--config", str(bad)]) == 2
    err = capsys.readouterr().err
    assert f"{bad}: {expected}" in err
    good = tmp_path / "good.toml"
    good.write_text('[fleets.prod.redis]\nurl = "redis://127.0.0.1:6379/0"\n[keys]\nfilter = "f"\n')
    assert main(["config", "check", "--config", str(good)]) == 0
