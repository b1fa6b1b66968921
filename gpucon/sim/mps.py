"""MPS in the simulated VMs: the demo's daemons and servers, so a restart can be tried.

``demo_daemons(fleet)`` describes one daemon per simulated VM (the two servers it shares
60/40, their stop/start/ready "commands"); ``SimMpsDaemon`` is the ``MpsDaemon`` the demo's
controls give the restart: ``quit`` marks the VM's daemon stopped (the console shows it),
``start`` brings it back after a moment, a stopped server is not ready (no traffic goes to it)
and a started one becomes ready after a short warm-up, so the demo shows a brief outage and
the recovery. Times are wall-clock seconds, short enough to watch.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from msgspec.structs import replace

from gpucon.config.mps import MpsDaemonConfig, MpsServerConfig
from gpucon.controls.base import MpsDaemon
from gpucon.controls.mps_transport import Ran
from gpucon.errors import BadParams, shown
from gpucon.model.fleet import MpsState, SlotKind
from gpucon.sim.fleet import SimFleet

SERVER_PROGRAM = "sim-server"
DAEMON_START_S = 0.6
SERVER_WARMUP_S = 1.5


def demo_daemons(fleet: SimFleet, now: float | None = None) -> tuple[MpsDaemonConfig, ...]:
    """One daemon per simulated VM with MPS, its servers from the VM's split."""
    daemons = []
    for slot in fleet.reading(time.time() if now is None else now).slots:
        if slot.kind is not SlotKind.VM or slot.vm is None or slot.vm.mps is None:
            continue
        vm = slot.vm.name
        servers = tuple(
            MpsServerConfig(
                backend=name,
                thread_pct=pct,
                start=(SERVER_PROGRAM, "start", name),
                stop=(SERVER_PROGRAM, "stop", name),
                ready=(SERVER_PROGRAM, "ready", name),
                ready_timeout_s=30.0,
            )
            for name, pct in slot.vm.mps.thread_pct_by_server
        )
        daemons.append(
            MpsDaemonConfig(
                target=vm,
                transport="simulated",
                pipe_dir=f"/run/{vm}/nvidia-mps",
                log_dir=f"/var/log/{vm}/nvidia-mps",
                default_thread_pct=100.0,
                pinned_mem_limit="20G",
                servers=servers,
            )
        )
    return tuple(sorted(daemons, key=lambda d: d.target))


@dataclass
class SimMpsDaemon:
    """The simulated VM's daemon."""

    fleet: SimFleet
    vm: str
    _ready_at: dict[str, float] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def where(self) -> str:
        return f"simulated VM {self.vm}"

    def _mps(self) -> MpsState:
        return self.fleet.vm_mps(self.vm) or MpsState()

    def running(self) -> bool:
        return bool(self._mps().daemon_running)

    def stop(self, wait_s: float) -> None:
        time.sleep(0.2)
        self.fleet.set_vm_mps(self.vm, replace(self._mps(), daemon_running=False))

    def start(self, wait_s: float) -> None:
        time.sleep(min(DAEMON_START_S, wait_s))
        self.fleet.set_vm_mps(self.vm, replace(self._mps(), daemon_running=True))

    def speaks(self, query: str) -> bool:
        return True

    def set_default_thread_pct(self, pct: float) -> None:
        self.fleet.set_vm_mps(self.vm, replace(self._mps(), default_thread_pct=pct))

    def default_thread_pct(self) -> float | None:
        return self._mps().default_thread_pct

    def set_default_pinned_mem_limit(self, device: str, limit: str) -> None:
        self.fleet.set_vm_mps(self.vm, replace(self._mps(), pinned_mem_limit=f"{device}={limit}"))

    def default_pinned_mem_limit(self, device: str) -> str | None:
        limit = self._mps().pinned_mem_limit
        return limit.split("=", 1)[-1] if limit else None

    def server_pids(self) -> tuple[int, ...]:
        with self._lock:
            return tuple(range(4000, 4000 + len(self._ready_at)))

    def client_env(self) -> dict[str, str]:
        return {"CUDA_MPS_PIPE_DIRECTORY": f"/run/{self.vm}/nvidia-mps"}

    def run(self, argv: tuple[str, ...], env: Mapping[str, str], timeout_s: float) -> Ran:
        if len(argv) != 3 or argv[0] != SERVER_PROGRAM:
            return Ran(127, "", f"{argv[0] if argv else '?'}: not a simulated server command")
        verb, name = argv[1], argv[2]
        if verb == "stop":
            self.fleet.set_backend_ready(name, False)
            with self._lock:
                self._ready_at.pop(name, None)
            return Ran(0, "", "")
        if verb == "start":
            if not self.running():
                return Ran(1, "", "no MPS daemon: the server cannot create its context")
            with self._lock:
                self._ready_at[name] = time.monotonic() + SERVER_WARMUP_S
            return Ran(0, "", "")
        if verb == "ready":
            with self._lock:
                at = self._ready_at.get(name)
            if at is None or time.monotonic() < at:
                return Ran(1, "", "")
            self.fleet.set_backend_ready(name, True)
            return Ran(0, "", "")
        return Ran(2, "", f"unknown verb {verb}")

    def state(self) -> MpsState:
        return self._mps()

    def close(self) -> None:
        """Nothing to close."""


def sim_daemons(fleet: SimFleet) -> Callable[[str], MpsDaemon]:
    """The demo's ``Controls.mps``: a simulated VM's name -> its daemon."""
    known = {d.target for d in demo_daemons(fleet)}
    cache: dict[str, SimMpsDaemon] = {}

    def lookup(target: str) -> MpsDaemon:
        if target not in known:
            raise BadParams(
                "target", f"no simulated VM {shown(target)} runs MPS ({', '.join(sorted(known))})"
            )
        return cache.setdefault(target, SimMpsDaemon(fleet, target))

    return lookup
