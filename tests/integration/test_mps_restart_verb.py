"""``gpucon mps-restart`` on a configured fleet: the config's ``[[fleets.NAME.mps]]`` daemon
(local transport, the stand-in control program and servers), a real Redis registry, the
guard's lock over the target and its backends, and the exit codes."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from gpucon.commands.cli import main
from gpucon.lab.registration import BackendRecord, register_backends
from gpucon.registry import keys
from tests.helpers.mps_standin import install_control, install_server, stop_servers

pytestmark = pytest.mark.integration


@pytest.fixture
def config(redis_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    install_control(tmp_path / "bin")
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}{os.pathsep}{os.environ['PATH']}")
    server = install_server(tmp_path)
    run = tmp_path / "run"
    run.mkdir()
    c = redis.Redis.from_url(redis_url, decode_responses=True)
    register_backends(
        c,
        [
            BackendRecord("a1", "http://127.0.0.1:1", "m", "h/gpu0", weight=2.0),
            BackendRecord("a2", "http://127.0.0.1:2", "m", "h/gpu1", weight=1.0),
        ],
    )
    c.close()
    path = tmp_path / "gpucon.toml"

    def argv(verb: str) -> str:
        return json.dumps([str(server), verb, "a1", str(run)])

    path.write_text(
        f"""operator = "cli@test"
audit_path = {json.dumps(str(tmp_path / "audit.jsonl"))}

[fleets.t.redis]
url = {json.dumps(redis_url)}

[[fleets.t.mps]]
target = "h/gpu0"
pipe_dir = {json.dumps(str(tmp_path / "pipe"))}
log_dir = {json.dumps(str(tmp_path / "log"))}
default_thread_pct = 80

[[fleets.t.mps.servers]]
backend = "a1"
thread_pct = 60
start = {argv("start")}
stop = {argv("stop")}
ready = {argv("ready")}
ready_timeout_s = 5
"""
    )
    yield path
    stop_servers(run)
    from gpucon.config.mps import MpsDaemonConfig
    from gpucon.controls.mps_daemons import command_daemon

    daemon = command_daemon(MpsDaemonConfig("h/gpu0", pipe_dir=str(tmp_path / "pipe")))
    if daemon.running():
        daemon.stop(5)


def test_restart_from_the_shell_with_json(
    config: Path, redis_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["--config", str(config), "mps-restart", "h/gpu0", "--yes", "--json"]) == 0
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    plan, outcome = lines[0]["plan"], lines[1]["outcome"]
    assert plan["blast_radius"]["backends"] == ["a1"]
    assert outcome["ok"] and outcome["details"]["outage_s"] is not None
    assert [s["step"] for s in outcome["steps"]][-1] == "undrain:a1"
    c = redis.Redis.from_url(redis_url, decode_responses=True)
    assert c.hget(keys.backend_key("a1"), "state") == "active"
    c.close()


def test_a_held_lock_on_a_backend_refuses_with_exit_4(
    config: Path, redis_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    c = redis.Redis.from_url(redis_url, decode_responses=True)
    holder = json.dumps({"token": "t", "holder": "ann@h1", "since": 1.0e9, "action": "drain"})
    c.set(keys.lock_key("a1"), holder, px=10_000)
    assert main(["--config", str(config), "mps-restart", "h/gpu0", "--yes"]) == 4
    assert "a1 is locked by ann@h1 (drain)" in capsys.readouterr().out
    assert c.hget(keys.backend_key("a1"), "state") == "active"
    c.close()


def test_read_only_and_unknown_targets_change_nothing(
    config: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["--config", str(config), "--read-only", "mps-restart", "h/gpu0", "--yes"]) == 3
    assert "read-only" in capsys.readouterr().err
    assert main(["--config", str(config), "mps-restart", "h/gpu9", "--dry-run"]) == 2
    assert "h/gpu0" in capsys.readouterr().err  # the known targets are named
