"""The command line's options: each offered only where it means something, plain-text help,
the console's own options before an implied ``live``, a scenario snapshot that shows its fault."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gpucon.commands.cli import build_parser, main


@pytest.fixture(autouse=True)
def no_config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("GPUCON_CONFIG", raising=False)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))


def help_of(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    with pytest.raises(SystemExit) as exited:
        main([*argv, "--help"])
    assert exited.value.code == 0
    return capsys.readouterr().out


def test_top_level_help_is_plain_text(capsys: pytest.CaptureFixture[str]) -> None:
    text = help_of(capsys)
    assert "``" not in text and "gpucon, the console for GPU inference fleets" in text


@pytest.mark.parametrize("command", ["snapshot", "lab", "scheduler", "backend"])
def test_screen_options_are_not_offered_where_there_is_no_screen(
    capsys: pytest.CaptureFixture[str], command: str
) -> None:
    text = help_of(capsys, command)
    assert "--noc" not in text and "--theme" not in text and "--read-only" not in text


def test_screen_options_are_offered_on_the_console(capsys: pytest.CaptureFixture[str]) -> None:
    for command in ("live", "demo"):
        text = help_of(capsys, command)
        assert "--noc" in text and "--theme" in text and "--read-only" in text


def test_screen_option_before_a_command_without_a_screen_is_an_error(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["--noc", "snapshot", "--demo"])
    assert exited.value.code == 2
    assert "--noc means nothing to 'gpucon snapshot'" in capsys.readouterr().err


def test_console_options_before_the_implied_live_command() -> None:
    argv = ["live", "--noc", "--page-seconds", "3"]  # what main builds from the README's form
    args = build_parser(argv).parse_args(argv)
    assert args.command == "live" and args.noc and args.page_seconds == 3.0


def test_noc_page_seconds_without_a_command_reaches_the_live_console(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    # no config here: the live console says so and exits 2 from its own run, not from argparse
    assert main(["--noc", "--page-seconds", "3"]) == 2
    err = capsys.readouterr().err
    assert "invalid choice" not in err and "unrecognized" not in err


def test_audit_help_lists_only_the_exit_codes_it_can_give(
    capsys: pytest.CaptureFixture[str],
) -> None:
    text = help_of(capsys, "audit")
    assert "--dry-run" not in text.split("exit codes:")[1]
    assert "lock" not in text.split("exit codes:")[1]


@pytest.mark.parametrize("command", ["scheduler", "backend", "lab"])
def test_every_lab_option_has_help(command: str) -> None:
    argv = [command, "--help"]
    parser = build_parser(argv)
    sub = next(a for a in parser._actions if a.dest == "command")
    options = sub.choices[command]._actions  # type: ignore[index]
    missing = [a.option_strings for a in options if a.option_strings and not a.help]
    assert not missing


@pytest.mark.parametrize("argv", [["snapshot", "--demo"], ["demo"]])
def test_a_bad_scenario_exits_2(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    try:
        code = main([*argv, "--scenario", "meteor"])
    except SystemExit as exited:
        code = int(exited.code or 0)
    assert code == 2
    assert "unknown 'meteor'" in capsys.readouterr().err


def test_scenario_snapshot_runs_to_the_fault_and_says_so(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["snapshot", "--demo", "--json", "--scenario", "backend-down"]) == 0
    out, err = capsys.readouterr()
    doc = json.loads(out)
    assert "run 45 s" in err and "incident starts at 10 s" in err
    assert any("backend down" in a["message"] for a in doc["alerts"])


@pytest.mark.parametrize(
    ("scenario", "rule"),
    [("gpu-fault", "xid"), ("backend-down", "not_ready"), ("noisy-neighbour", "p95_slo")],
)
def test_each_scenario_snapshot_shows_its_fault(
    capsys: pytest.CaptureFixture[str], scenario: str, rule: str
) -> None:
    """gpu-fault's XID comes 30 s after the incident starts: a snapshot taken then showed
    `XID none` and no alert, under a line saying the fleet ran into the incident."""
    assert main(["snapshot", "--demo", "--json", "--scenario", scenario]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert any(a["rule"] == rule for a in doc["alerts"]), doc["alerts"]


def test_console_options_before_an_explicit_subcommand_are_its_own() -> None:
    from gpucon.commands.cli import leading_options_first

    argv = leading_options_first(["--noc", "--page-seconds", "3", "demo", "--size", "8"])
    assert argv == ["demo", "--noc", "--page-seconds", "3", "--size", "8"]
    args = build_parser(argv).parse_args(argv)
    assert args.command == "demo" and args.noc and args.page_seconds == 3.0 and args.size == 8
    # a value that happens to be a command's name is not taken for the command
    assert leading_options_first(["--fleet", "demo", "live"])[0] == "live"
