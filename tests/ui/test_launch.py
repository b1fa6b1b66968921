"""`gpucon live` / `gpucon demo` argument handling, before any UI starts."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from gpucon.cli import build_parser, main


def test_launch_module_imports_no_textual() -> None:
    code = "import sys, gpucon.cli; gpucon.cli.build_parser(); print('textual' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_demo_options_parse() -> None:
    args = build_parser().parse_args(
        ["demo", "--seed", "3", "--scenario", "burst", "--size", "64", "--refresh", "2"]
    )
    assert (args.seed, args.scenario, args.size, args.refresh) == (3, "burst", 64, 2.0)
    args = build_parser().parse_args(["--read-only", "demo"])
    assert args.read_only and args.seed == 7


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["demo", "--scenario", "nope"], "unknown 'nope'"),
        (["demo", "--size", "100000"], "size"),
        (["demo", "--refresh", "0"], "--refresh must be a positive"),
        (["demo", "--noc", "--page-seconds", "-1"], "--page-seconds must be a positive"),
        (["live"], "gpucon demo"),  # no config: how to write one, and the demo
    ],
)
def test_bad_arguments_exit_2_with_a_message(
    argv: list[str],
    message: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))
    monkeypatch.delenv("GPUCON_CONFIG", raising=False)
    for name in ("GPUCON_REDIS_URL", "GPUCON_PROMETHEUS_URL"):
        monkeypatch.delenv(name, raising=False)
    try:
        code = main(argv)
    except SystemExit as exc:
        code = exc.code  # type: ignore[assignment]
    assert code == 2
    assert message in capsys.readouterr().err


def _launch(argv: list[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Any:
    """Run ``gpucon ARGV`` up to the point the app would start; return the app."""
    from gpucon.app import GpuconApp

    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    monkeypatch.delenv("GPUCON_CONFIG", raising=False)
    built: list[GpuconApp] = []
    monkeypatch.setattr(GpuconApp, "run", lambda self, *a, **k: built.append(self))
    assert main(argv) == 0
    return built[0]


def test_read_only_demo_never_builds_controls(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    import gpucon.controls.sim_registry as sim_registry

    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("controls built in read-only mode")

    monkeypatch.setattr(sim_registry, "build_sim_controls", refuse)
    for flag in ("--read-only", "--noc"):
        app = _launch([flag, "demo"], monkeypatch, tmp_path)
        assert app.read_only and app.controls is None


def test_demo_gets_controls_over_the_simulated_fleet(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    app = _launch(["demo", "--seed", "3", "--page-seconds", "4"], monkeypatch, tmp_path)
    assert app.page_s == 4.0
    assert not app.read_only and app.controls is not None
    assert app.mode == "demo" and app.fleet_name == "simulated"


def test_example_config_remaps_only_known_bindings() -> None:
    from gpucon.app import known_binding_ids
    from gpucon.config import load_config

    example = Path(__file__).resolve().parents[2] / "examples" / "config.toml"
    config = load_config(example, env={})
    assert config.ui.keys, "the example shows how to remap keys"
    assert set(config.ui.keys) <= known_binding_ids()
