"""The MPS daemons a fleet configures, as the restart drives them: local, SSH or Kubernetes.

``daemons_from_config(daemons, kube)`` gives the ``Controls.mps`` lookup: a target's name to
a fresh ``MpsDaemon``. ``CommandDaemon`` drives ``nvidia-cuda-mps-control`` through a
transport (this machine, or a VM over SSH) and runs the servers' commands through the same
one; the Kubernetes daemon (``gpucon.controls.mps_kube``) restarts the GPU operator's pod.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gpucon.config.mps import MpsDaemonConfig
from gpucon.controls.base import MpsDaemon
from gpucon.controls.mps import MpsControl, MpsError
from gpucon.controls.mps_transport import LocalTransport, Ran, SshTransport, Transport
from gpucon.errors import BadParams, shown
from gpucon.model.fleet import MpsState


@dataclass
class CommandDaemon:
    """A daemon reached by running its control program (``MpsControl``) here or over SSH."""

    control: MpsControl
    device: str = "0"

    @property
    def where(self) -> str:
        return self.control.where

    def running(self) -> bool:
        return self.control.is_running()

    def stop(self, wait_s: float) -> None:
        self.control.quit(wait_s=wait_s)

    def start(self, wait_s: float) -> None:
        self.control.start()
        import time

        deadline = time.monotonic() + wait_s
        while not self.control.is_running():
            if time.monotonic() >= deadline:
                raise MpsError(f"the daemon started but does not answer after {wait_s:g}s")
            time.sleep(0.05)

    def speaks(self, query: str) -> bool:
        return self.control.speaks(query)

    def set_default_thread_pct(self, pct: float) -> None:
        self.control.set_default_thread_pct(pct)

    def default_thread_pct(self) -> float | None:
        return self.control.default_thread_pct()

    def set_default_pinned_mem_limit(self, device: str, limit: str) -> None:
        self.control.set_default_pinned_mem_limit(device, limit)

    def default_pinned_mem_limit(self, device: str) -> str | None:
        return self.control.default_pinned_mem_limit(device)

    def server_pids(self) -> tuple[int, ...]:
        return self.control.server_pids()

    def client_env(self) -> dict[str, str]:
        return self.control.env()

    def run(self, argv: tuple[str, ...], env: Mapping[str, str], timeout_s: float) -> Ran:
        assert self.control.transport is not None
        return self.control.transport.run(argv, env=env, timeout_s=timeout_s)

    def state(self) -> MpsState:
        return self.control.state(self.device)

    def close(self) -> None:
        if self.control.transport is not None:
            self.control.transport.close()


def transport_for(config: MpsDaemonConfig) -> Transport:
    if config.transport == "ssh":
        assert config.ssh_host is not None  # the config check requires it
        return SshTransport(
            host=config.ssh_host,
            port=config.ssh_port,
            user=config.ssh_user,
            key_file=config.ssh_key_file,
            known_hosts_file=config.ssh_known_hosts_file,
            connect_timeout_s=config.timeout_s,
        )
    return LocalTransport()


def command_daemon(config: MpsDaemonConfig) -> CommandDaemon:
    control = MpsControl(
        # paths on the daemon's machine: only ever passed on as text
        pipe_dir=Path(config.pipe_dir),
        log_dir=Path(config.log_dir),
        executable=config.executable,
        timeout_s=config.timeout_s,
        transport=transport_for(config),
    )
    return CommandDaemon(control, config.device)


def daemon_for(config: MpsDaemonConfig, kube: Any = None) -> MpsDaemon:
    """The daemon ``config`` describes, not yet connected (a transport connects on first use)."""
    if config.transport == "kube":
        from gpucon.controls.mps_kube import KubeMpsDaemon

        return KubeMpsDaemon.from_config(config, kube)
    return command_daemon(config)


def daemons_from_config(
    daemons: tuple[MpsDaemonConfig, ...], kube: Any = None
) -> Callable[[str], MpsDaemon] | None:
    """``Controls.mps``: a target's name -> its daemon; None when none is configured."""
    if not daemons:
        return None
    by_target = {d.target: d for d in daemons}

    def lookup(target: str) -> MpsDaemon:
        config = by_target.get(target)
        if config is None:
            known = ", ".join(sorted(by_target))
            raise BadParams("target", f"no MPS daemon is configured for {shown(target)} ({known})")
        return daemon_for(config, kube)

    return lookup
