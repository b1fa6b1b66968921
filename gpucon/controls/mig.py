"""The MIG write side: what a re-slice destroys and creates, and the NVML executor.

``MigExecutor`` is what ``gpucon.actions.reslice_apply`` drives: read the GPU instances that
exist (with their placements and compute instances) and the compute processes, destroy a
compute or GPU instance, create a GPU instance at a placement and its full-size compute
instance. Three implement it: ``NvmlMig`` (here: NVML through pynvml, on this host's GPUs),
``gpucon.controls.mig_smi.SmiMig`` (``nvidia-smi mig`` commands) and the demo's
``gpucon.sim.mig.SimMig``. The Kubernetes path (``gpucon.controls.mig_kube``) hands the whole
change to NVIDIA's mig-manager instead. Every NVML refusal surfaces as ``MigError`` naming the
call and NVML's error (``InUse``, ``InsufficientResources``, ...).
"""

from __future__ import annotations

import contextlib
import ctypes
import threading
from dataclasses import dataclass
from typing import Any, Protocol


class MigError(RuntimeError):
    """A MIG call refused: ``code`` is NVML's return code where there is one."""

    def __init__(self, what: str, detail: str, code: int | None = None) -> None:
        super().__init__(f"{what}: {detail}")
        self.code = code


@dataclass(frozen=True, slots=True)
class GpuRef:
    """Which GPU: its host (slot ids), index on the host and UUID (NVML looks it up by UUID)."""

    host: str
    index: int
    uuid: str


@dataclass(frozen=True, slots=True)
class GpuInstance:
    """A GPU instance that exists, where it sits, and its compute instances' ids."""

    gi_id: int
    profile_id: int
    start: int
    size: int
    ci_ids: tuple[int, ...] = ()


class MigExecutor(Protocol):
    """Reads and changes one GPU's MIG instances (``kind``: nvml, nvidia-smi, simulated)."""

    kind: str

    def instances(self, gpu: GpuRef) -> tuple[GpuInstance, ...]: ...

    def processes(self, gpu: GpuRef) -> tuple[int, ...]:
        """PIDs of the compute processes on the GPU and its MIG devices."""
        ...

    def destroy_ci(self, gpu: GpuRef, gi_id: int, ci_id: int) -> None: ...

    def destroy_gi(self, gpu: GpuRef, gi_id: int) -> None: ...

    def create_gi(self, gpu: GpuRef, profile_id: int, start: int | None, size: int | None) -> int:
        """Create a GPU instance of ``profile_id`` at ``start`` (None: where the executor
        places it); returns its id."""
        ...

    def create_ci(self, gpu: GpuRef, gi_id: int) -> int:
        """Create the compute instance that covers all of GPU instance ``gi_id``."""
        ...


# compute-instance profile index covering a GPU instance of N slices (NVML_COMPUTE_INSTANCE_
# PROFILE_{1,2,3,4,6,7,8}_SLICE)
_FULL_CI_PROFILE = {1: 0, 2: 1, 3: 2, 4: 3, 6: 5, 7: 6, 8: 7}
_COMPUTE_ENGINES_SHARED = 0
_MOST = 16  # instances of one profile: the arrays NVML fills


class NvmlMig:
    """MigExecutor through NVML (``pynvml``, or a stand-in module with the same functions)."""

    kind = "nvml"

    def __init__(self, nvml: Any = None) -> None:
        self._nvml = nvml
        self._lock = threading.Lock()
        self._started = False

    def _api(self) -> Any:
        with self._lock:
            if self._nvml is None:
                import pynvml

                self._nvml = pynvml
            if not self._started:
                self._call("nvmlInit", self._nvml.nvmlInit)
                self._started = True
            return self._nvml

    def _call(self, what: str, fn: Any, *args: Any) -> Any:
        try:
            return fn(*args)
        except Exception as exc:
            code = getattr(exc, "value", None)
            raise MigError(what, f"{type(exc).__name__} ({exc})", code) from exc

    def _device(self, gpu: GpuRef) -> Any:
        nvml = self._api()
        return self._call(f"find GPU {gpu.uuid}", nvml.nvmlDeviceGetHandleByUUID, gpu.uuid)

    def _gi(self, gpu: GpuRef, gi_id: int) -> Any:
        nvml = self._api()
        device = self._device(gpu)
        return self._call(f"GPU instance {gi_id}", nvml.nvmlDeviceGetGpuInstanceById, device, gi_id)

    def _gi_profiles(self, device: Any) -> list[Any]:
        nvml = self._api()
        found = []
        for index in range(getattr(nvml, "NVML_GPU_INSTANCE_PROFILE_COUNT", 9)):
            try:
                found.append(nvml.nvmlDeviceGetGpuInstanceProfileInfo(device, index))
            except nvml.NVMLError:
                continue  # not a profile of this GPU
        return found

    def _listed(self, what: str, fn: Any, parent: Any, profile_id: int, kind: Any) -> list[Any]:
        """The handles NVML's ``fn`` lists of one profile under ``parent`` (a GPU or a GPU
        instance): it fills an array of ``kind`` and says how many it filled."""
        array = (kind * _MOST)()
        count = ctypes.c_uint(0)
        self._call(what, fn, parent, profile_id, array, ctypes.byref(count))
        return [array[i] for i in range(count.value)]

    def _ci_ids(self, gi: Any) -> tuple[int, ...]:
        nvml = self._api()
        ids: list[int] = []
        for index in range(getattr(nvml, "NVML_COMPUTE_INSTANCE_PROFILE_COUNT", 8)):
            try:
                info = nvml.nvmlGpuInstanceGetComputeInstanceProfileInfo(
                    gi, index, _COMPUTE_ENGINES_SHARED
                )
            except nvml.NVMLError:
                continue
            listed = self._listed(
                "list compute instances",
                nvml.nvmlGpuInstanceGetComputeInstances,
                gi,
                info.id,
                nvml.c_nvmlComputeInstance_t,
            )
            ids.extend(int(nvml.nvmlComputeInstanceGetInfo(handle).id) for handle in listed)
        return tuple(sorted(ids))

    def instances(self, gpu: GpuRef) -> tuple[GpuInstance, ...]:
        nvml = self._api()
        device = self._device(gpu)
        found: list[GpuInstance] = []
        for profile in self._gi_profiles(device):
            listed = self._listed(
                "list GPU instances",
                nvml.nvmlDeviceGetGpuInstances,
                device,
                profile.id,
                nvml.c_nvmlGpuInstance_t,
            )
            for handle in listed:
                info = self._call("GPU instance info", nvml.nvmlGpuInstanceGetInfo, handle)
                found.append(
                    GpuInstance(
                        int(info.id),
                        int(info.profileId),
                        int(info.placement.start),
                        int(info.placement.size),
                        self._ci_ids(handle),
                    )
                )
        return tuple(sorted(found, key=lambda g: g.start))

    def processes(self, gpu: GpuRef) -> tuple[int, ...]:
        nvml = self._api()
        device = self._device(gpu)
        handles = [device]
        most = self._call("MIG device count", nvml.nvmlDeviceGetMaxMigDeviceCount, device)
        for index in range(int(most or 0)):
            try:
                handles.append(nvml.nvmlDeviceGetMigDeviceHandleByIndex(device, index))
            except nvml.NVMLError:
                continue  # no MIG device at this index
        pids: set[int] = set()
        for handle in handles:
            running = self._call(
                "list compute processes", nvml.nvmlDeviceGetComputeRunningProcesses, handle
            )
            pids.update(int(p.pid) for p in running or ())
        return tuple(sorted(pids))

    def destroy_ci(self, gpu: GpuRef, gi_id: int, ci_id: int) -> None:
        nvml = self._api()
        gi = self._gi(gpu, gi_id)
        what = f"compute instance {ci_id} of GPU instance {gi_id}"
        ci = self._call(what, nvml.nvmlGpuInstanceGetComputeInstanceById, gi, ci_id)
        self._call(f"destroy {what}", nvml.nvmlComputeInstanceDestroy, ci)

    def destroy_gi(self, gpu: GpuRef, gi_id: int) -> None:
        nvml = self._api()
        gi = self._gi(gpu, gi_id)
        self._call(f"destroy GPU instance {gi_id}", nvml.nvmlGpuInstanceDestroy, gi)

    def create_gi(self, gpu: GpuRef, profile_id: int, start: int | None, size: int | None) -> int:
        nvml = self._api()
        device = self._device(gpu)
        if start is None or size is None:  # no placements known: NVML places it
            gi = self._call(
                f"create a GPU instance of profile {profile_id}",
                nvml.nvmlDeviceCreateGpuInstance,
                device,
                profile_id,
            )
            return int(self._call("GPU instance info", nvml.nvmlGpuInstanceGetInfo, gi).id)
        placement = nvml.c_nvmlGpuInstancePlacement_t(start, size)
        gi = self._call(
            f"create a GPU instance of profile {profile_id} at slice {start}",
            nvml.nvmlDeviceCreateGpuInstanceWithPlacement,
            device,
            profile_id,
            ctypes.byref(placement),  # NVML takes a pointer to the placement
        )
        return int(self._call("GPU instance info", nvml.nvmlGpuInstanceGetInfo, gi).id)

    def create_ci(self, gpu: GpuRef, gi_id: int) -> int:
        nvml = self._api()
        device = self._device(gpu)
        gi = self._gi(gpu, gi_id)
        info = self._call("GPU instance info", nvml.nvmlGpuInstanceGetInfo, gi)
        slices = next(
            (p.sliceCount for p in self._gi_profiles(device) if p.id == info.profileId), None
        )
        index = _FULL_CI_PROFILE.get(int(slices or 0))
        if index is None:
            raise MigError(f"GPU instance {gi_id}", f"no compute profile covers {slices} slices")
        ci_profile = self._call(
            "compute instance profile",
            nvml.nvmlGpuInstanceGetComputeInstanceProfileInfo,
            gi,
            index,
            _COMPUTE_ENGINES_SHARED,
        )
        ci = self._call(
            f"create the compute instance of GPU instance {gi_id}",
            nvml.nvmlGpuInstanceCreateComputeInstance,
            gi,
            ci_profile.id,
        )
        return int(self._call("compute instance info", nvml.nvmlComputeInstanceGetInfo, ci).id)

    def close(self) -> None:
        with self._lock:
            if self._started and self._nvml is not None:
                with contextlib.suppress(Exception):  # shutting down: nothing to do about it
                    self._nvml.nvmlShutdown()
            self._started = False
