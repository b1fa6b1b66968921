"""`gpucon live` / `gpucon demo` argument handling, before any UI starts."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from gpucon.commands.cli import build_parser, main

if TYPE_CHECKING:
    from gpucon.app import GpuconApp


def test_launch_module_imports_no_textual() -> None:
    code = (
        "import sys, gpucon.commands.cli; gpucon.commands.cli.build_parser(); "
        "print('textual' in sys.modules)"
    )
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
        (["demo", "--refresh", "0"], "--refresh (seconds): must be from 0.05 to 86,400, got 0"),
        (["demo", "--refresh", "nan"], "--refresh (seconds): must be a finite number"),
        (["demo", "--refresh", "1e308"], "--refresh (seconds): must be from 0.05 to 86,400"),
        (
            ["demo", "--noc", "--page-seconds", "-1"],
            "--page-seconds (seconds): must be from 1 to 86,400, got -1",
        ),
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


def _launch(argv: list[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> GpuconApp:
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
    import gpucon.session

    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("controls built in read-only mode")

    monkeypatch.setattr(gpucon.session, "demo_controls", refuse)
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


def _write_config(tmp_path: Path, body: str) -> Path:
    path = tmp_path / "gpucon.toml"
    path.write_text(body, encoding="utf-8")
    return path


LIVE_CONFIG = """
[ui]
refresh_s = 3.0

[fleets.default.redis]
url = "redis://127.0.0.1:9/0"
streams = ["gen:queue"]
group = "g1"
"""


def test_no_subcommand_is_live_with_its_defaults(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """``gpucon --config X`` once crashed: the live options had no defaults without ``live``."""
    monkeypatch.delenv("GPUCON_READ_ONLY", raising=False)
    config = _write_config(tmp_path, LIVE_CONFIG)
    app = _launch(["--config", str(config)], monkeypatch, tmp_path)
    assert app.mode == "live" and app.fleet_name == "default"
    from gpucon.hub import Hub

    assert isinstance(app.feed, Hub) and app.feed.refresh_s == 3.0  # the config's, as `live`
    assert app.page_s == 10.0
    # the actions flow finds the probe targets and the audit stream's Redis in it
    redis_config = app.config.fleet.redis if app.config is not None else None
    assert redis_config is not None and redis_config.url == "redis://127.0.0.1:9/0"
    app = _launch(["--read-only", f"--config={config}"], monkeypatch, tmp_path)
    assert app.mode == "live" and app.read_only and app.controls is None


def test_subcommand_is_found_after_valued_options() -> None:
    from gpucon.commands.cli import chosen_command

    assert chosen_command(["--config", "demo", "live"]) == "live"
    assert chosen_command(["--config=x", "--read-only", "demo", "--seed", "3"]) == "demo"
    assert chosen_command(["--theme", "gpucon-noc"]) is None
    assert chosen_command([]) is None


@pytest.mark.parametrize("how", ["file", "env"])
async def test_config_read_only_means_no_controls_and_no_action_keys(
    how: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    import gpucon.session
    from gpucon.app import ACTIONS, READ_ONLY_ACTIONS
    from gpucon.screens.fleet import FleetScreen

    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("controls built in read-only mode")

    monkeypatch.setattr(gpucon.session, "demo_controls", refuse)
    argv = ["demo"]
    if how == "file":
        monkeypatch.delenv("GPUCON_READ_ONLY", raising=False)
        argv = [
            "--config",
            str(_write_config(tmp_path, "read_only = true\n" + LIVE_CONFIG)),
            "demo",
        ]
    else:  # no config file at all: the demo still honours the environment
        monkeypatch.setenv("GPUCON_READ_ONLY", "yes")
    app = _launch(argv, monkeypatch, tmp_path)
    assert app.read_only and app.controls is None
    assert "READ-ONLY" in app.badges
    async with app.run_test(size=(160, 45)) as pilot:
        await pilot.pause()
        assert type(app.screen) is FleetScreen
        ids = {a.binding.id for a in app.screen.active_bindings.values() if a.binding.id}
        assert not ids & (set(ACTIONS) - set(READ_ONLY_ACTIONS))  # the audit log only reads


def test_bad_environment_for_the_demo_is_a_message(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))
    monkeypatch.delenv("GPUCON_CONFIG", raising=False)
    monkeypatch.setenv("GPUCON_READ_ONLY", "perhaps")
    with pytest.raises(SystemExit) as exc:
        main(["demo"])
    assert exc.value.code == 2
    assert "GPUCON_READ_ONLY" in capsys.readouterr().err
