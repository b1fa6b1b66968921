"""The MPS control daemons gpucon may restart (``[[fleets.NAME.mps]]``), and their servers.

One table per daemon: which target it serves (the name ``gpucon mps-restart`` takes: a slot id,
a GPU's UUID or a VM's name), how to reach it (``local``: this machine; ``ssh``: a VM that
runs its own daemon; ``kube``: the GPU operator's MPS control-daemon pod on a node), its pipe
and log directories, the limits to apply after a restart, and the inference servers that are
its clients (``[[fleets.NAME.mps.servers]]``): the registry backend each one is, how to stop,
start and ask it whether it is ready, and its own share of the GPU (60/40).
"""

from __future__ import annotations

import msgspec

TRANSPORTS = ("local", "ssh", "kube")


class MpsServerConfig(msgspec.Struct, frozen=True, gc=False):
    """An inference server that is a client of the daemon (an MPS client)."""

    backend: str  # its name in the scheduler registry: drained before, undrained after
    # its own share and pinned-memory limit, given to it at start
    # (CUDA_MPS_ACTIVE_THREAD_PERCENTAGE, CUDA_MPS_PINNED_DEVICE_MEM_LIMIT like "0=20G")
    thread_pct: float | None = None
    pinned_mem_limit: str | None = None
    # argument lists run through the daemon's transport (no shell); empty: not managed
    start: tuple[str, ...] = ()
    stop: tuple[str, ...] = ()
    ready: tuple[str, ...] = ()  # exits 0 once the server serves
    ready_timeout_s: float = 60.0


class MpsDaemonConfig(msgspec.Struct, frozen=True, gc=False):
    """One CUDA MPS control daemon and how gpucon reaches it."""

    target: str
    transport: str = "local"
    pipe_dir: str = "/tmp/nvidia-mps"
    log_dir: str = "/var/log/nvidia-mps"
    device: str = "0"  # the device the default pinned-memory limit is set for
    default_thread_pct: float | None = None
    pinned_mem_limit: str | None = None  # the default device pinned-memory limit, like "16G"
    executable: str = "nvidia-cuda-mps-control"
    timeout_s: float = 5.0
    # ssh: a VM that runs its own daemon; its host key must be in known_hosts_file
    ssh_host: str | None = None
    ssh_port: int = 22
    ssh_user: str | None = None
    ssh_key_file: str | None = None
    ssh_known_hosts_file: str | None = None
    # kube: the GPU operator's MPS control-daemon pod on this node
    node: str | None = None
    namespace: str = "gpu-operator"
    pod_selector: str = "app=nvidia-device-plugin-mps-control-daemon"
    servers: tuple[MpsServerConfig, ...] = ()

    def where(self) -> str:
        """How the daemon is reached, for plans and messages."""
        if self.transport == "ssh":
            user = f"{self.ssh_user}@" if self.ssh_user else ""
            return f"ssh {user}{self.ssh_host}:{self.ssh_port}"
        if self.transport == "kube":
            return f"kube pod {self.pod_selector} on node {self.node} ({self.namespace})"
        return self.transport  # "local"; the demo's daemons say "simulated"
