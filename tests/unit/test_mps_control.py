"""MpsControl's command building and parsing, against a STAND-IN ``nvidia-cuda-mps-control``.

The stand-in is a small shell script put first on PATH: it records its argv and stdin, keeps a
daemon's state in files under the pipe directory, and answers like the real control program
(which cannot run without a GPU). The real daemon is exercised in tests/device/test_mps_gpu.py.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from gpucon.controls.mps import (
    MpsControl,
    MpsError,
    check_mem_limit,
    format_percentage,
    parse_percentage,
    parse_pids,
)
from gpucon.model.fleet import MpsState
from tests.helpers.mps_standin import install_control


@pytest.fixture
def control(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> MpsControl:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    install_control(bin_dir)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("MPS_STANDIN_LOG", str(tmp_path / "standin.log"))
    return MpsControl(pipe_dir=tmp_path / "pipe", log_dir=tmp_path / "log", timeout_s=2.0)


def standin_log(control: MpsControl) -> list[str]:
    return (control.pipe_dir.parent / "standin.log").read_text().splitlines()


def test_start_query_set_quit_round_trip(control: MpsControl) -> None:
    assert control.state() == MpsState(daemon_running=False)
    control.start()
    assert control.pipe_dir.is_dir() and control.log_dir.is_dir()
    assert control.is_running()
    assert control.default_thread_pct() == 100.0
    control.set_default_thread_pct(60)
    control.set_default_pinned_mem_limit(0, "2048M")
    (control.pipe_dir / "servers").write_text("4242\n4343\n")
    state = control.state(device=0)
    assert state == MpsState(
        daemon_running=True,
        default_thread_pct=60.0,
        thread_pct_by_server=(("4242", 60.0), ("4343", 60.0)),
        pinned_mem_limit="2048M",
    )
    control.quit(wait_s=1.0)
    assert not control.is_running()
    assert control.control_socket().exists()  # like the real daemon, which leaves it
    log = standin_log(control)
    assert "argv:-d" in log
    assert "stdin:set_default_active_thread_percentage 60" in log
    assert "stdin:set_default_device_pinned_mem_limit 0 2048M" in log
    assert "stdin:quit" in log
    pipe_lines = {line for line in log if line.startswith("pipe:")}
    assert pipe_lines == {f"pipe:{control.pipe_dir} log:{control.log_dir}"}


def test_errors_name_the_command(control: MpsControl) -> None:
    with pytest.raises(MpsError, match=r"get_server_list.*Cannot find MPS control daemon"):
        control.server_pids()
    control.start()
    with pytest.raises(MpsError, match=r"-d: exit status 1: An instance"):
        control.start()


def test_timeout_is_an_error_naming_the_command(
    control: MpsControl, monkeypatch: pytest.MonkeyPatch
) -> None:
    control.start()
    control.timeout_s = 0.3
    monkeypatch.setenv("MPS_STANDIN_HANG", "1")
    with pytest.raises(MpsError, match=r"get_server_list.*no answer within 0.3s"):
        control.server_pids()


def test_missing_executable_is_named(tmp_path: Path) -> None:
    control = MpsControl(tmp_path / "p", tmp_path / "l", executable="no-such-mps-control-x")
    with pytest.raises(MpsError, match="no-such-mps-control-x not found"):
        control.start()


@pytest.mark.parametrize("bad", [0, -5, 100.5, float("nan"), "60", True])
def test_bad_percentage_is_refused_before_sending(control: MpsControl, bad: object) -> None:
    control.start()
    with pytest.raises(ValueError, match="active thread percentage"):
        control.set_default_thread_pct(bad)  # type: ignore[arg-type]
    assert not any("set_default_active" in line for line in standin_log(control))


@pytest.mark.parametrize("bad", ["2 G", "lots", "1G\nquit", ""])
def test_bad_mem_limit_is_refused_before_sending(control: MpsControl, bad: str) -> None:
    control.start()
    with pytest.raises(ValueError, match="pinned memory limit"):
        control.set_default_pinned_mem_limit(0, bad)
    with pytest.raises(ValueError, match="device"):
        control.set_default_pinned_mem_limit("0 quit", "1G")
    assert not any("pinned_mem" in line for line in standin_log(control))


def test_one_line_commands_only(control: MpsControl) -> None:
    with pytest.raises(MpsError, match="one non-empty line"):
        control.command("get_server_list\nquit")


def test_parsers() -> None:
    assert parse_pids("1234\n5678\n") == (1234, 5678)
    assert parse_pids("") == ()
    assert parse_percentage("100.0") == 100.0
    assert parse_percentage("Default active thread percentage: 40") == 40.0
    assert parse_percentage("None") is None
    assert parse_percentage("0") is None
    assert format_percentage(33.5) == "33.5"
    assert check_mem_limit(" 16G ") == "16G"
