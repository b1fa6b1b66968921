"""``gpucon serve``'s command line: the served console is read-only whatever it is given, the
wall warns when reachable from other machines, and bad options or configs stop it at once."""

from __future__ import annotations

import shlex
import socket
import sys
from pathlib import Path

import pytest

from gpucon.commands import console, served
from gpucon.commands.cli import main
from gpucon.commands.serve import exposure_warning, is_loopback
from gpucon.commands.serve_origin import OriginPolicy
from gpucon.config import GpuconConfig
from gpucon.controls.base import ReadOnlyError


@pytest.mark.parametrize("host", ["127.0.0.1", "127.0.0.2", "::1", "[::1]", "localhost"])
def test_loopback_needs_no_warning(host: str) -> None:
    assert is_loopback(host)
    assert exposure_warning(host, 8080) == []


@pytest.mark.parametrize("host", ["0.0.0.0", "::", "10.1.2.3", "wall.example.org"])
def test_anything_else_is_warned_about(host: str) -> None:
    assert not is_loopback(host)
    text = "\n".join(exposure_warning(host, 8080))
    assert "NOT loopback" in text and "reverse proxy" in text and f"{host}:8080" in text


def test_the_served_command_runs_the_wall_module_with_quoted_arguments() -> None:
    line = served.command_line(
        config=Path("/etc/gpu con.toml"),
        fleet="a; rm -rf /",
        demo=False,
        page_seconds=7.0,
        refresh=None,
    )
    assert line.startswith("exec ")
    argv = shlex.split(line.removeprefix("exec "))
    assert argv[:3] == [sys.executable, "-m", "gpucon.commands.served"]
    assert argv[argv.index("--fleet") + 1] == "a; rm -rf /"
    assert argv[argv.index("--config") + 1] == "/etc/gpu con.toml"


@pytest.mark.parametrize("argv", [[], ["--demo"], ["--fleet", "x", "--page-seconds", "3"]])
def test_the_served_console_is_always_read_only_and_noc(argv: list[str]) -> None:
    args = served.parse(argv)
    assert args.read_only is True and args.noc is True and args.theme is None


@pytest.mark.parametrize("option", ["--read-only", "--no-read-only", "--noc", "--theme"])
def test_the_served_command_line_has_no_mode_options(option: str) -> None:
    with pytest.raises(SystemExit):
        served.parse([option])


def test_a_served_session_builds_no_controls_whatever_the_config_says(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("GPUCON_READ_ONLY", "0")
    session, _ = console._open(served.parse(["--demo"]), GpuconConfig(read_only=False), 1.0)
    try:
        assert session.read_only and session.controls_factory is None
        with pytest.raises(ReadOnlyError):
            session.controls()
    finally:
        session.close()


@pytest.mark.parametrize(
    "argv", [["--max-viewers", "0"], ["--max-viewers", "1000"], ["--page-seconds", "nan"]]
)
def test_bad_options_exit_2_before_serving(
    argv: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["serve", "--demo", *argv]) == 2
    assert "gpucon serve:" in capsys.readouterr().err


def test_a_missing_config_is_refused_at_start(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = tmp_path / "nope.toml"
    assert main(["serve", "--config", str(missing)]) == 2
    assert "gpucon:" in capsys.readouterr().err


def test_a_port_in_use_is_a_message_and_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        assert main(["serve", "--demo", "--port", str(port)]) == 2
    assert f"cannot listen on 127.0.0.1:{port}" in capsys.readouterr().err


def test_only_the_walls_own_page_or_an_allowed_origin_may_watch() -> None:
    policy = OriginPolicy.build(loopback_only=True, allow_origins=["https://Wall.Example.org/"])
    own = "127.0.0.1:8080"
    assert policy.origin_ok("http://127.0.0.1:8080", own)
    assert policy.origin_ok("https://wall.example.org", own)  # the reverse proxy
    assert policy.origin_ok(None, own)  # no browser page: a script
    for origin in ("http://evil.example", "http://127.0.0.1:9999", "null", "file://", ""):
        assert not policy.origin_ok(origin, own), origin


def test_bound_on_loopback_only_loopback_or_allowed_hosts_are_answered() -> None:
    policy = OriginPolicy.build(loopback_only=True, allow_origins=["https://wall.example.org"])
    for host in ("127.0.0.1:8080", "localhost:8080", "[::1]:8080", "wall.example.org"):
        assert policy.host_ok(host), host
    # DNS rebinding: a hostile name resolving to 127.0.0.1 is refused
    refused: list[str | None] = ["rebind.evil.example:8080", "", None, "10.0.0.1:8080"]
    for bad in refused:
        assert not policy.host_ok(bad), bad
    assert OriginPolicy.build(loopback_only=False, allow_origins=[]).host_ok("any.example")


def test_an_allow_origin_that_is_no_origin_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["serve", "--demo", "--allow-origin", "wall.example.org"]) == 2
    assert "--allow-origin 'wall.example.org'" in capsys.readouterr().err
