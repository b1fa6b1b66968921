"""The MPS restart over SSH: a real ``sshd`` on loopback (``tests.helpers.sshd``) stands for a
VM that runs its own daemon; the control program and the servers there are the stand-ins of
``tests.helpers.mps_standin``, run by absolute path as a VM's would be. Also: a host key gpucon
does not know is refused before anything runs."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from gpucon.actions import mps_restart
from gpucon.actions.guard import execute
from gpucon.actions.registry_snapshot import read_registry
from gpucon.config.mps import MpsDaemonConfig, MpsServerConfig
from gpucon.controls.audit_log import AuditLog
from gpucon.controls.base import Controls
from gpucon.controls.mps import MpsError
from gpucon.controls.mps_daemons import command_daemon, daemons_from_config
from gpucon.controls.registry import RedisRegistry
from gpucon.lab.registration import BackendRecord, register_backends
from gpucon.registry import keys
from tests.helpers.mps_standin import install_control, install_server, stop_servers
from tests.helpers.sshd import SshServer, sshd_server

pytestmark = pytest.mark.integration
VM = "vm-4090-b"


@pytest.fixture
def sshd(tmp_path: Path) -> Iterator[SshServer]:
    with sshd_server(tmp_path / "sshd") as server:
        yield server


@pytest.fixture
def daemon_config(tmp_path: Path, sshd: SshServer) -> Iterator[MpsDaemonConfig]:
    control = install_control(tmp_path / "vm" / "bin")
    server = str(install_server(tmp_path / "vm"))
    run = tmp_path / "vm" / "run"
    run.mkdir()

    def server_config(name: str, pct: float) -> MpsServerConfig:
        return MpsServerConfig(
            backend=name,
            thread_pct=pct,
            start=(server, "start", name, str(run)),
            stop=(server, "stop", name, str(run)),
            ready=(server, "ready", name, str(run)),
            ready_timeout_s=5.0,
        )

    yield MpsDaemonConfig(
        target=VM,
        transport="ssh",
        pipe_dir=str(tmp_path / "vm" / "pipe"),
        log_dir=str(tmp_path / "vm" / "log"),
        executable=str(control),
        default_thread_pct=100.0,
        pinned_mem_limit="20G",
        ssh_host="127.0.0.1",
        ssh_port=sshd.port,
        ssh_user=sshd.user,
        ssh_key_file=str(sshd.key_file),
        ssh_known_hosts_file=str(sshd.known_hosts_file),
        servers=(server_config("sdxl-v", 60), server_config("sd15-v", 40)),
    )
    stop_servers(run)


def test_restart_over_ssh_runs_the_sequence_on_the_vm(
    redis_url: str, tmp_path: Path, daemon_config: MpsDaemonConfig
) -> None:
    client = redis.Redis.from_url(redis_url, decode_responses=True)
    register_backends(
        client,
        [
            BackendRecord("sdxl-v", "http://127.0.0.1:1", "sdxl", f"vm:{VM}", weight=2.0),
            BackendRecord("sd15-v", "http://127.0.0.1:2", "sd15", f"vm:{VM}", weight=1.0),
            BackendRecord("sdxl-w", "http://127.0.0.1:3", "sdxl", "h/gpu1", weight=1.0),
            BackendRecord("sd15-w", "http://127.0.0.1:4", "sd15", "h/gpu2", weight=1.0),
        ],
    )
    daemon = command_daemon(daemon_config)
    assert daemon.where.startswith("ssh ")
    daemon.start(5)  # over SSH: the pipe directory is made there
    snapshot, _ = read_registry(client)
    params = {"target": VM, "daemon": mps_restart.daemon_params(daemon_config), "timeout_s": 5}
    plan = mps_restart.plan_mps_restart(snapshot, params)
    assert plan.ok and "ssh" in plan.preconditions[0].text
    registry = RedisRegistry.from_url(redis_url)
    controls = Controls(
        registry,
        AuditLog(tmp_path / "audit.jsonl", registry.append_audit),
        "ann@h1",
        mps=daemons_from_config((daemon_config,)),
    )
    outcome = execute(mps_restart.apply, plan, controls, lambda e: None)
    assert outcome.ok, f"{outcome.message} — {outcome.state_left}"
    run = tmp_path / "vm" / "run"
    assert "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=60" in (run / "sdxl-v.env").read_text()
    assert "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=40" in (run / "sd15-v.env").read_text()
    assert daemon.default_pinned_mem_limit("0") == "20G"
    assert len(daemon.server_pids()) == 2
    assert client.hget(keys.backend_key("sdxl-v"), "state") == "active"
    daemon.stop(5)
    daemon.close()
    client.close()


def test_an_unknown_host_key_is_refused(
    tmp_path: Path, sshd: SshServer, daemon_config: MpsDaemonConfig
) -> None:
    from msgspec.structs import replace

    empty = tmp_path / "empty_known_hosts"
    empty.write_text("")
    daemon = command_daemon(replace(daemon_config, ssh_known_hosts_file=str(empty)))
    with pytest.raises(MpsError, match=r"not found in known_hosts|Server .* not found"):
        daemon.start(5)
    assert not (tmp_path / "vm" / "pipe").exists(), "nothing ran on the unknown host"
    daemon.close()
