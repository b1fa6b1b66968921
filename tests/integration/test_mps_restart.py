"""The MPS restart through the real Redis registry and the local transport (stand-in control
program and stand-in servers, ``tests.helpers.mps_standin``): the whole sequence, 60/40 given
to the servers, limits read back, an old driver's missing commands skipped, a failure that
stops the run and a rerun that converges, and the guard's audit naming each step."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis
from msgspec.structs import replace

from gpucon.actions import mps_restart
from gpucon.actions.audit import read_audit
from gpucon.actions.guard import execute
from gpucon.actions.plan import OutcomeStatus, Plan, ProgressEvent
from gpucon.actions.registry_snapshot import read_registry
from gpucon.config.mps import MpsDaemonConfig, MpsServerConfig
from gpucon.controls.audit_log import AuditLog
from gpucon.controls.base import Controls
from gpucon.controls.mps_daemons import command_daemon, daemons_from_config
from gpucon.controls.registry import RedisRegistry
from gpucon.lab.registration import BackendRecord, register_backends
from gpucon.model.fleet import BackendState
from gpucon.registry import keys
from tests.helpers.mps_standin import install_control, install_server, stop_servers

pytestmark = pytest.mark.integration
TARGET = "vm-4090-a"


@pytest.fixture
def client(redis_url: str) -> Iterator[redis.Redis]:
    c = redis.Redis.from_url(redis_url, decode_responses=True)
    register_backends(
        c,
        [
            BackendRecord("sdxl-a", "http://127.0.0.1:1", "sdxl", "h/gpu0", weight=3.0),
            BackendRecord("sdxl-b", "http://127.0.0.1:2", "sdxl", "h/gpu0", weight=2.0),
            BackendRecord("sdxl-c", "http://127.0.0.1:3", "sdxl", "h/gpu1", weight=1.0),
        ],
    )
    yield c
    c.close()


@pytest.fixture
def daemon_config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[MpsDaemonConfig]:
    install_control(tmp_path / "bin")
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("MPS_STANDIN_FAIL_START", str(tmp_path / "fail-start"))
    server = str(install_server(tmp_path))
    run = tmp_path / "run"
    run.mkdir()

    def server_config(name: str, pct: float, limit: str) -> MpsServerConfig:
        return MpsServerConfig(
            backend=name,
            thread_pct=pct,
            pinned_mem_limit=limit,
            start=(server, "start", name, str(run)),
            stop=(server, "stop", name, str(run)),
            ready=(server, "ready", name, str(run)),
            ready_timeout_s=5.0,
        )

    yield MpsDaemonConfig(
        target=TARGET,
        pipe_dir=str(tmp_path / "pipe"),
        log_dir=str(tmp_path / "log"),
        default_thread_pct=100.0,
        pinned_mem_limit="16G",
        servers=(server_config("sdxl-a", 60, "0=20G"), server_config("sdxl-b", 40, "0=4G")),
    )
    stop_servers(run)


def controls_for(redis_url: str, tmp_path: Path, daemon: MpsDaemonConfig) -> Controls:
    registry = RedisRegistry.from_url(redis_url)
    audit = AuditLog(tmp_path / "audit.jsonl", registry.append_audit)
    return Controls(registry, audit, "ann@h1", mps=daemons_from_config((daemon,)))


def plan_for(client: redis.Redis, daemon: MpsDaemonConfig) -> Plan:
    snapshot, _ = read_registry(client)
    params = {"target": TARGET, "daemon": mps_restart.daemon_params(daemon), "timeout_s": 5}
    return mps_restart.plan_mps_restart(snapshot, params)


def test_restart_runs_the_whole_sequence_and_gives_each_server_its_share(
    client: redis.Redis, redis_url: str, tmp_path: Path, daemon_config: MpsDaemonConfig
) -> None:
    daemon = command_daemon(daemon_config)
    daemon.start(5)  # a daemon that runs, with a stale setting the restart replaces
    daemon.set_default_thread_pct(30)
    plan = plan_for(client, daemon_config)
    assert plan.ok and plan.blast_radius.backends == ("sdxl-a", "sdxl-b")
    keys_in_order = [s.key for s in plan.steps]
    assert keys_in_order.index("drained:sdxl-b") < keys_in_order.index("stop-server:sdxl-a")
    assert keys_in_order.index("quit-daemon") < keys_in_order.index("start-daemon")
    assert keys_in_order[-2:] == ["undrain:sdxl-a", "undrain:sdxl-b"]
    events: list[ProgressEvent] = []
    controls = controls_for(redis_url, tmp_path, daemon_config)
    outcome = execute(mps_restart.apply, plan, controls, events.append)
    assert outcome.status is OutcomeStatus.OK, outcome.message
    assert outcome.details["outage_s"] is not None
    run = tmp_path / "run"
    env_a = (run / "sdxl-a.env").read_text()
    assert "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=60" in env_a
    assert "CUDA_MPS_PINNED_DEVICE_MEM_LIMIT=0=20G" in env_a
    assert f"CUDA_MPS_PIPE_DIRECTORY={daemon_config.pipe_dir}" in env_a
    assert "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=40" in (run / "sdxl-b.env").read_text()
    assert daemon.default_thread_pct() == 100.0
    assert daemon.default_pinned_mem_limit("0") == "16G"
    assert len(daemon.server_pids()) == 2
    for name, weight in (("sdxl-a", "3.0"), ("sdxl-b", "2.0")):
        assert client.hget(keys.backend_key(name), "state") == "active"
        assert client.hget(keys.backend_key(name), "weight") == weight
    assert client.hget(keys.backend_key("sdxl-c"), "state") == "active"  # another GPU
    records = read_audit(tmp_path / "audit.jsonl", 200)
    steps = [r.step for r in records if r.event == "step"]
    assert steps.index("quit-daemon") < steps.index("thread-pct") < steps.index("undrain:sdxl-b")
    assert records[-1].event == "outcome" and records[-1].status == "ok"
    daemon.stop(5)


def test_a_failed_step_stops_and_a_rerun_converges(
    client: redis.Redis, redis_url: str, tmp_path: Path, daemon_config: MpsDaemonConfig
) -> None:
    command_daemon(daemon_config).start(5)
    (tmp_path / "fail-start").touch()  # the daemon will not start again
    controls = controls_for(redis_url, tmp_path, daemon_config)
    first = execute(mps_restart.apply, plan_for(client, daemon_config), controls, lambda e: None)
    assert first.status is OutcomeStatus.FAILED
    assert "start-daemon" in first.message
    assert "MPS daemon NOT running" in first.state_left
    assert "sdxl-a: state=drained" in first.state_left
    assert [r.step for r in first.steps if not r.ok] == ["start-daemon"]
    records = read_audit(tmp_path / "audit.jsonl", 200)
    failed = [r for r in records if r.event == "step" and r.status == "failed"]
    assert [r.step for r in failed] == ["start-daemon"]

    (tmp_path / "fail-start").unlink()
    snapshot, _ = read_registry(client)
    assert snapshot.backends["sdxl-a"].state is BackendState.DRAINED
    again = plan_for(client, daemon_config)
    assert again.params["drain"] == ["sdxl-a", "sdxl-b"], "the rerun owns the drained backends"
    second = execute(mps_restart.apply, again, controls, lambda e: None)
    assert second.status is OutcomeStatus.OK, second.message
    said = {r.step: r.text for r in second.steps}
    assert "drained already" in said["draining:sdxl-a"]
    assert "not running" in said["quit-daemon"]
    assert client.hget(keys.backend_key("sdxl-a"), "state") == "active"
    assert client.hget(keys.backend_key("sdxl-a"), "weight") == "3.0"
    command_daemon(daemon_config).stop(5)


def test_an_old_driver_without_pinned_limits_is_restarted_with_a_note(
    client: redis.Redis,
    redis_url: str,
    tmp_path: Path,
    daemon_config: MpsDaemonConfig,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("MPS_STANDIN_OLD", "1")
    controls = controls_for(redis_url, tmp_path, daemon_config)
    outcome = execute(mps_restart.apply, plan_for(client, daemon_config), controls, lambda e: None)
    assert outcome.status is OutcomeStatus.OK, outcome.message
    assert "does not speak set_default_device_pinned_mem_limit" in outcome.message
    said = {r.step: r.text for r in outcome.steps}
    assert "skipped" in said["pinned-mem"] and "read back" in said["thread-pct"]
    command_daemon(daemon_config).stop(5)


def test_a_backend_drained_by_someone_else_stays_drained(
    client: redis.Redis, redis_url: str, tmp_path: Path, daemon_config: MpsDaemonConfig
) -> None:
    registry = RedisRegistry.from_url(redis_url)
    registry.begin_drain("sdxl-b", "bob@h2", "xid 79")
    registry.mark_state("sdxl-b", "drained", "bob@h2", "xid 79")
    plan = plan_for(client, daemon_config)
    assert [p.name for p in plan.warnings] == ["drained_already"]
    assert plan.params["drain"] == ["sdxl-a"]
    controls = controls_for(redis_url, tmp_path, daemon_config)
    outcome = execute(mps_restart.apply, plan, controls, lambda e: None)
    assert outcome.ok, outcome.message
    assert client.hget(keys.backend_key("sdxl-b"), "state") == "drained"
    assert client.hget(keys.backend_key("sdxl-b"), "reason") == "xid 79"
    command_daemon(replace(daemon_config)).stop(5)


class Crash(BaseException):
    """The process dying between two steps (nothing in apply catches a BaseException)."""


def test_a_crash_between_quit_and_start_and_a_rerun_converges(
    client: redis.Redis, redis_url: str, tmp_path: Path, daemon_config: MpsDaemonConfig
) -> None:
    daemon = command_daemon(daemon_config)
    daemon.start(5)
    controls = controls_for(redis_url, tmp_path, daemon_config)

    def die_before_start(event: ProgressEvent) -> None:
        if event.step == "start-daemon":
            raise Crash

    with pytest.raises(Crash):  # no guard: as if the process were killed right there
        mps_restart.apply(plan_for(client, daemon_config), controls, die_before_start)
    assert not daemon.running(), "it died with the daemon quit"
    assert client.hget(keys.backend_key("sdxl-a"), "state") == "drained"
    outcome = execute(mps_restart.apply, plan_for(client, daemon_config), controls, lambda e: None)
    assert outcome.ok, outcome.message
    assert daemon.running() and len(daemon.server_pids()) == 2
    assert client.hget(keys.backend_key("sdxl-a"), "state") == "active"
    assert client.hget(keys.backend_key("sdxl-b"), "weight") == "2.0"
    daemon.stop(5)
