"""The NVML source: the local host's GPUs, their MIG slices and compute processes.

Reads through pynvml (or a stand-in with the same function names). Every call goes through
``NvmlCalls`` (one wrapper: "not supported" becomes None, shown as "n/a"). Slow fields — names,
MIG mode, the MIG devices and their profiles, the GPU-instance profile table, power limit,
clocks, GPM support, XID event registration — are refreshed every ``slow_cadence_s``;
utilization, memory, temperature, power, clock event reasons (thermal slowdown, power cap),
processes, GPM activity and the XID events waiting (never blocking) on every read. NVML is
initialised lazily inside ``read`` (in the hub's worker thread); a failure there is a ``down``
Reading, never an exception.

Slots: a whole GPU is one GPU slot when MIG is off; with MIG on, each GPU instance is one MIG
slot (``host/gpu0/gi3``). A slot's activity comes from GPM on Hopper and later (per MIG slice
too), else from NVML's ``utilization.gpu`` for whole GPUs, else it is unknown (None): MIG
slices have no classic per-slice utilization, and the merge may fill it from DCGM.
"""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from collections.abc import Callable
from typing import Any

import pynvml
from msgspec.structs import replace

from gpucon.model.fleet import ComputeProcess, Gpu, Health, Slot, SlotKind
from gpucon.model.ids import gpu_slot_id, mig_slot_id
from gpucon.model.reading import Reading, failed_reading
from gpucon.sources.base import describe_error
from gpucon.sources.nvml_calls import (
    ERROR_UNINITIALIZED,
    Garbage,
    NvmlCallError,
    NvmlCalls,
    describe_nvml_error,
    handle_label,
)
from gpucon.sources.nvml_gpm import GpmSampler
from gpucon.sources.nvml_health import XidWatch, read_clock_reasons
from gpucon.sources.nvml_static import GpuStatic, MigDevice, read_statics

NVML_UTILIZATION = "NVML utilization.gpu"
MIB = 1024 * 1024
_PROCESS_FUNCTIONS = [
    "nvmlDeviceGetComputeRunningProcesses_v3",
    "nvmlDeviceGetComputeRunningProcesses",
    "nvmlDeviceGetComputeRunningProcesses_v2",
]
_PROCESS_NAME_CACHE = 4096


# how long close() waits for a read in flight before it gives up on nvmlShutdown
CLOSE_WAIT_S = 0.5


class _ReadState:
    """One read's notes: values that made no sense, calls that failed (a plain class: see
    ``nvml_calls``)."""

    __slots__ = ("errors", "garbage")

    def __init__(self) -> None:
        self.garbage = Garbage()
        self.errors: list[str] = []


class NvmlSource:
    """Reads the local GPUs through NVML; implements ``gpucon.sources.base.Source``."""

    name = "nvml"

    def __init__(
        self,
        host: str | None = None,
        cadence_s: float = 1.0,
        slow_cadence_s: float = 10.0,
        timeout_s: float = 2.0,
        nvml: Any = pynvml,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.host = host or socket.gethostname()
        self.cadence_s = cadence_s
        self.slow_cadence_s = slow_cadence_s
        self.timeout_s = timeout_s
        self._clock = clock
        self._calls = NvmlCalls(nvml, label_of=handle_label)
        self._gpm = GpmSampler(self._calls, clock)
        self._xid = XidWatch(self._calls, clock, handle_label)
        self._lock = threading.Lock()
        self._initialized = False
        self._statics: tuple[GpuStatic, ...] = ()
        self._statics_at: float | None = None
        self._process_names: dict[int, str | None] = {}
        self.calls_last_read = 0
        self.slow_path_last_read = False

    # --- lifecycle ---------------------------------------------------------------------------
    def _init(self) -> str | None:
        """Initialise NVML once; the error text when it cannot be."""
        if self._initialized:
            return None
        self._calls.calls += 1
        try:
            self._calls.nvml.nvmlInit()
        except Exception as exc:
            return f"NVML not available: {describe_nvml_error(exc)}"
        self._initialized = True
        self._calls.reset()
        self._xid.reset()  # an event set of an earlier NVML session is gone with it
        self._statics_at = None
        return None

    def close(self) -> None:
        # a read hung inside the driver holds the lock: give up on a clean shutdown rather
        # than hang whoever closes (the console quitting); the process exit releases NVML
        if not self._lock.acquire(timeout=CLOSE_WAIT_S):
            return
        try:
            if not self._initialized:
                return
            self._gpm.close()
            self._xid.close()
            with contextlib.suppress(Exception):  # shutting down must not raise
                self._calls.nvml.nvmlShutdown()
            self._initialized = False
            self._statics = ()
            self._statics_at = None
        finally:
            self._lock.release()

    @property
    def xid_unwatched_why(self) -> dict[str, str]:
        """GPU UUID -> why its XID events are not watched (e.g. refused in a VM)."""
        return dict(self._xid.why_unwatched)

    def invalidate(self) -> None:
        """Make the next read refresh the slow fields (e.g. after a re-slice)."""
        self._statics_at = None

    # --- reading -----------------------------------------------------------------------------
    def read(self) -> Reading:
        with self._lock:
            started = self._clock()
            perf = time.perf_counter()
            calls_before = self._calls.calls
            try:
                reading = self._read(started, perf)
            except Exception as exc:  # the source never raises into the hub
                reading = failed_reading(
                    self.name, started, time.perf_counter() - perf, describe_error(exc)
                )
            self.calls_last_read = self._calls.calls - calls_before
            return replace(reading, round_trips=self.calls_last_read)

    def _read(self, started: float, perf: float) -> Reading:
        problem = self._init()
        if problem is not None:
            return failed_reading(self.name, started, time.perf_counter() - perf, problem)
        state = _ReadState()
        self.slow_path_last_read = self._slow_due(started)
        if self.slow_path_last_read:
            try:
                previous = {s.uuid: s for s in self._statics}
                self._statics = read_statics(self._calls, self._gpm, state.garbage, previous)
            except NvmlCallError as exc:
                self._after_call_error(exc)
                return failed_reading(self.name, started, time.perf_counter() - perf, str(exc))
            self._statics_at = started
            self._forget_gone_targets()
            for static in self._statics:
                self._xid.register(static.uuid, static.handle)
        self._xid.poll({handle_label(s.handle): s.uuid for s in self._statics}, state.garbage)
        gpus: list[Gpu] = []
        slots: list[Slot] = []
        for static in self._statics:
            if time.perf_counter() - perf > self.timeout_s:
                state.errors.append(f"read exceeded {self.timeout_s:g}s; later GPUs skipped")
                break
            try:
                gpu, gpu_slots = self._read_gpu(static, state)
            except NvmlCallError as exc:
                state.errors.append(f"gpu{static.index}: {exc}")
                self._after_call_error(exc)
                continue
            gpus.append(gpu)
            slots.extend(gpu_slots)
        duration = time.perf_counter() - perf
        if state.errors and not gpus and self._statics:
            return failed_reading(self.name, started, duration, "; ".join(state.errors))
        problems = state.errors + state.garbage.notes
        return Reading(
            source=self.name,
            health=Health.DEGRADED if problems else Health.OK,
            taken_at=started,
            duration_s=duration,
            error="; ".join(problems[:5]) if problems else None,
            gpus=tuple(gpus),
            slots=tuple(slots),
        )

    def _slow_due(self, now: float) -> bool:
        return self._statics_at is None or now - self._statics_at >= self.slow_cadence_s

    def _after_call_error(self, exc: NvmlCallError) -> None:
        self.invalidate()
        if exc.code == ERROR_UNINITIALIZED:
            self._initialized = False

    def _forget_gone_targets(self) -> None:
        live = {s.uuid for s in self._statics} | {
            (s.uuid, m.gi_id) for s in self._statics for m in s.mig_devices
        }
        for key in self._gpm.targets():
            if key not in live:
                self._gpm.forget(key)
        self._xid.forget({s.uuid for s in self._statics})

    def _read_gpu(self, static: GpuStatic, state: _ReadState) -> tuple[Gpu, list[Slot]]:
        calls, garbage = self._calls, state.garbage
        h = static.handle
        util = calls.get("nvmlDeviceGetUtilizationRates", h)
        util_pct = garbage.number(getattr(util, "gpu", None), "utilization.gpu", 0, 100)
        used, total = self._memory(h, garbage, f"gpu{static.index}")
        temperature = calls.get("nvmlDeviceGetTemperature", h, pynvml.NVML_TEMPERATURE_GPU)
        power_mw = calls.get("nvmlDeviceGetPowerUsage", h)
        power_w = garbage.number(power_mw, "power", 0, 10_000_000)
        reasons = read_clock_reasons(calls, h, garbage)
        xid = self._xid.last(static.uuid)
        gpu = Gpu(
            uuid=static.uuid,
            host=self.host,
            index=static.index,
            name=static.name,
            util_pct=util_pct,
            mem_used_mib=used,
            mem_total_mib=total,
            temperature_c=garbage.number(temperature, "temperature", -100, 200),
            power_w=None if power_w is None else power_w / 1000.0,
            power_limit_w=static.power_limit_w,
            sm_clock_mhz=static.sm_clock_mhz,
            mem_clock_mhz=static.mem_clock_mhz,
            mig_enabled=static.mig_enabled,
            sm_count=static.sm_count,
            processes=self._processes(h, garbage),
            mig_profiles=static.profiles,
            xid_last=None if xid is None else xid.code,
            xid_at=None if xid is None else xid.at,
            xid_watched=self._xid.watched(static.uuid),
            thermal_slowdown=reasons.thermal_slowdown,
            power_capped=reasons.power_capped,
        )
        if static.mig_enabled:
            return gpu, [self._mig_slot(static, m, state) for m in static.mig_devices]
        activity, metric = util_pct, NVML_UTILIZATION if util_pct is not None else None
        if static.gpm_supported:
            found = self._gpm.activity(static.uuid, h, None, garbage)
            if found is not None and found.best()[0] is not None:
                activity, metric = found.best()
        slot = Slot(
            id=gpu_slot_id(self.host, static.index),
            kind=SlotKind.GPU,
            host=self.host,
            gpu_uuid=static.uuid,
            gpu_index=static.index,
            gpu_name=static.name,
            profile=static.name,
            sm_count=static.sm_count,
            mem_used_mib=used,
            mem_total_mib=total,
            activity_pct=activity,
            activity_metric=metric,
            processes=gpu.processes,
        )
        return gpu, [slot]

    def _mig_slot(self, static: GpuStatic, mig: MigDevice, state: _ReadState) -> Slot:
        garbage = state.garbage
        what = f"gpu{static.index}/gi{mig.gi_id}"
        activity, metric = None, None
        try:
            used, total = self._memory(mig.handle, garbage, what)
            processes = self._processes(mig.handle, garbage)
            if static.gpm_supported:
                key = (static.uuid, mig.gi_id)
                found = self._gpm.activity(key, static.handle, mig.gi_id, garbage)
                if found is not None:
                    activity, metric = found.best()
        except NvmlCallError as exc:
            # e.g. the instance went away in a re-slice: this slot is unknown, the others stay,
            # and the layout is read again on the next read
            state.errors.append(f"{what}: {exc}")
            self._after_call_error(exc)
            used, total, processes = None, None, ()
        return Slot(
            id=mig_slot_id(self.host, static.index, mig.gi_id),
            kind=SlotKind.MIG,
            host=self.host,
            gpu_uuid=static.uuid,
            gpu_index=static.index,
            gpu_name=static.name,
            profile=mig.profile,
            gi_id=mig.gi_id,
            ci_id=mig.ci_id,
            sm_count=mig.sm_count,
            mem_used_mib=used,
            mem_total_mib=total if total is not None else mig.memory_mib,
            activity_pct=activity,
            activity_metric=metric,
            processes=processes,
        )

    def _memory(
        self, handle: Any, garbage: Garbage, what: str
    ) -> tuple[float | None, float | None]:
        info = self._calls.get("nvmlDeviceGetMemoryInfo", handle)
        if info is None:
            return None, None
        total = garbage.number(getattr(info, "total", None), f"{what} memory total")
        used = garbage.number(getattr(info, "used", None), f"{what} memory used")
        if total is not None and used is not None and used > total:
            garbage.notes.append(f"{what} memory: used {used:.0f} > total {total:.0f}")
            used = None
        return (
            None if used is None else used / MIB,
            None if total is None else total / MIB,
        )

    def _processes(self, handle: Any, garbage: Garbage) -> tuple[ComputeProcess, ...]:
        found = self._calls.get(_PROCESS_FUNCTIONS, handle)
        if not found:
            return ()
        processes: list[ComputeProcess] = []
        for entry in found:
            pid = garbage.integer(getattr(entry, "pid", None), "process pid")
            if pid is None:
                continue
            memory = garbage.number(getattr(entry, "usedGpuMemory", None), "process memory")
            processes.append(
                ComputeProcess(
                    pid=pid,
                    name=self._process_name(pid, garbage),
                    used_memory_mib=None if memory is None else memory / MIB,
                )
            )
        return tuple(processes)

    def _process_name(self, pid: int, garbage: Garbage) -> str | None:
        if pid in self._process_names:
            return self._process_names[pid]
        if len(self._process_names) >= _PROCESS_NAME_CACHE:
            self._process_names.clear()
        raw = self._calls.get("nvmlSystemGetProcessName", pid, remember=False)
        name = garbage.text(raw, "process name")
        self._process_names[pid] = name
        return name
