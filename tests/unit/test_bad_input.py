"""Bad input is refused by name, exit 2, no traceback: the config file's bytes and numbers,
[keys] remaps, theme files and the console's options. Each case reproduces one that once
crashed gpucon or was accepted and then broke it."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpucon.commands.cli import main
from gpucon.config import ConfigError, load_config
from gpucon.config.keys import key_collisions
from gpucon.themes import ThemeError, load_theme_file


def run_cli(argv: list[str]) -> int:
    try:
        return main(argv)
    except SystemExit as exc:  # the console's usage errors exit before it starts
        return int(exc.code or 0)


def write(tmp_path: Path, text: str | bytes, name: str = "c.toml") -> Path:
    path = tmp_path / name
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text, encoding="utf-8")
    return path


def test_a_config_that_is_not_utf8_is_a_named_config_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = write(tmp_path, b'fleet = "\xff"\n')
    with pytest.raises(ConfigError, match=r"expected UTF-8 text, got byte 0xff at offset 9"):
        load_config(bad, env={})
    assert run_cli(["--config", str(bad), "config", "check"]) == 2
    err = capsys.readouterr().err
    assert f"{bad}: expected UTF-8 text" in err
    assert "Traceback" not in err


@pytest.mark.parametrize(
    ("toml", "message"),
    [
        (
            "[fleets.a.redis]\ntimeout_s = 1e18\n",
            "fleets.a.redis.timeout_s: expected a number from 0.001 to 86,400, got a float 1e+18",
        ),
        (
            "[fleets.a.prometheus]\ncadence_s = 1e308\n",
            "fleets.a.prometheus.cadence_s: expected a number from 0.001 to 86,400",
        ),
        ("[fleets.a.nvml]\ntimeout_s = nan\n", "timeout_s: expected a finite number"),
        ("[fleets.a.nvml]\n[ui]\nrefresh_s = 0.001\n", "ui.refresh_s: expected a number from 0.05"),
        ("[fleets.a.nvml]\n[alerts]\nhot_activity_pct = 500\n", "from 0 to 100"),
        ("[fleets.a.nvml]\n[slo]\nm = 1e300\n", "slo.m: expected a number greater than 0"),
        (
            "[fleets.a.readiness]\nconcurrency = 99999999999999\n",
            "concurrency: expected an integer greater than 0 and at most 1,000,000",
        ),
        (
            '[fleets.a.prometheus]\nrate_window = "x"\n',
            "fleets.a.prometheus.rate_window: expected a PromQL duration such as 30s, 1m or 1h30m"
            ", got a string 'x'",
        ),
        (
            f'[fleets.a.redis]\ngroup = "{"g" * 10_000}"\n',
            "group: expected a string of at most 4,096 characters, got a string 'ggg",
        ),
        (
            '[fleets.a.nvml]\n[keys]\ndrain = "q"\n',
            "keys.drain = 'q' collides with quit ('q') on the fleet screen",
        ),
        (
            '[fleets.a.nvml]\n[keys]\nfilter = "ctrl+p"\n',
            "keys.filter = 'ctrl+p' collides with command_palette ('ctrl+p')",
        ),
    ],
)
def test_config_check_refuses_with_field_value_and_range(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], toml: str, message: str
) -> None:
    path = write(tmp_path, toml)
    assert run_cli(["--config", str(path), "config", "check"]) == 2
    err = capsys.readouterr().err
    assert message in err
    assert "Traceback" not in err and len(err) < 600  # the value is cut, not echoed whole


def test_a_good_rate_window_and_remap_pass(tmp_path: Path) -> None:
    text = '[fleets.a.prometheus]\nrate_window = "1h30m"\n[keys]\ndrain = "D"\nhelp = "?"\n'
    config = load_config(write(tmp_path, text), env={})
    assert config.fleet.prometheus is not None
    assert config.fleet.prometheus.rate_window == "1h30m"


def test_collisions_name_both_bindings_and_spare_the_defaults() -> None:
    assert key_collisions({}) == []
    assert key_collisions({"back": "escape,q"}) == []  # as by default: a screen's q closes it
    [problem] = key_collisions({"sort": "d"})
    assert "keys.sort = 'd' collides with drain ('d') on the fleet screen" in problem
    [problem] = key_collisions({"help": "/"})
    assert "collides with filter ('slash')" in problem
    # the same key on two different screens is fine
    assert key_collisions({"reload_audit": "d"}) == []
    # two remaps onto one key: named once
    assert len(key_collisions({"drain": "x", "undrain": "x"})) == 1


def test_the_console_refuses_a_colliding_remap_at_start(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write(tmp_path, '[fleets.a.nvml]\n[keys]\ndrain = "q"\n')
    assert run_cli(["--config", str(path), "demo"]) == 2
    assert "keys.drain = 'q' collides with quit" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("nan", "expected a finite number (from 0.05 to 86,400), got a float nan"),
        ("1e308", "expected a number from 0.05 to 86,400, got a float 1e+308"),
        ("0", "expected a number from 0.05 to 86,400, got a float 0.0"),
        ("soon", "expected a number of seconds, got a string 'soon'"),
    ],
)
def test_refresh_from_the_environment_is_refused_like_the_option(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    value: str,
    message: str,
) -> None:
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))
    monkeypatch.delenv("GPUCON_CONFIG", raising=False)
    monkeypatch.setenv("GPUCON_REFRESH_S", value)
    assert run_cli(["demo"]) == 2
    assert f"environment GPUCON_REFRESH_S (ui.refresh_s): {message}" in capsys.readouterr().err


THEME_HEAD = 'name = "mine"\nprimary = "#4aa8ff"\n'


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (
            '[variables]\n"util-hot" = 5\n',
            "variables.util-hot: expected a colour string such as '#4aa8ff', got 5",
        ),
        ('[variables]\nstale = "zzz"\n', "variables.stale: expected a colour such as"),
        ('[variables]\nfoo = "12 {"\n', "variables (foo): gpucon's stylesheet cannot use them"),
        ("[variables]\nfoo = 3\n", "variables.foo: expected a string of at most 200 characters"),
        ('secondary = "nope"\n', "secondary: expected a colour such as"),
        ("variables = 3\n", "variables: expected a table, got 3"),
    ],
)
def test_a_theme_file_with_bad_values_is_one_clear_message(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], body: str, message: str
) -> None:
    theme = write(tmp_path, THEME_HEAD + body, "mine.toml")
    with pytest.raises(ThemeError, match="theme file") as caught:
        load_theme_file(theme)
    assert message in str(caught.value)
    config = write(tmp_path, f'[fleets.a.nvml]\n[ui]\ntheme = "{theme}"\n')
    assert run_cli(["--config", str(config), "config", "check"]) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err


def test_a_good_theme_file_loads(tmp_path: Path) -> None:
    body = '[variables]\n"util-hot" = "#ff0000"\nstale = "rgb(1,2,3)"\n'
    theme = load_theme_file(write(tmp_path, THEME_HEAD + body, "mine.toml"))
    assert theme.variables["util-hot"] == "#ff0000"
