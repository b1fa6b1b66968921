"""An NVML STAND-IN for MIG reconfiguration: recorded profile tables, real placement and
occupancy rules, and NVML's refusals. Not NVML: the card here must never be reconfigured.

``NvmlMigStandIn(table)`` offers the pynvml functions a re-slice calls, with pynvml's own
ctypes types (handles are real ``c_nvmlDevice_t``/``c_nvmlGpuInstance_t`` pointers, arrays are
filled as NVML fills them, placements are read through the pointer NVML is given) and pynvml's
own ``NVMLError`` subclasses. Its rules are NVML's documented ones, with the tables and
placements recorded in tests/fixtures/mig/:

- creating a GPU instance: MIG disabled -> NotSupported; an unknown profile, a start the
  profile may not use, or a size not its own -> InvalidArgument; slices already covered by
  another instance, or the profile's instance count reached -> InsufficientResources;
- a GPU instance with compute instances cannot be destroyed -> InUse; a compute instance with
  processes on it cannot be destroyed -> InUse; an id that does not exist -> NotFound;
- a compute instance covers its whole GPU instance; a second one -> InsufficientResources.

Where it differs from NVML: GPU-instance ids are the lowest free ones (NVML's own ids depend on
the placement and the GPU model); one compute-instance profile per size; no MIG mode changes
(a re-slice never changes the mode). ``fail_next(fn, code)`` makes the next call of ``fn``
fail once (a crash between steps); ``calls`` lists every mutating call made.
"""

from __future__ import annotations

import ctypes
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

import pynvml

from gpucon.model.mig_profiles import MigProfile, ProfileTable

# compute-instance profile index -> the slices it covers (NVML_COMPUTE_INSTANCE_PROFILE_*)
CI_SLICES = {0: 1, 1: 2, 2: 3, 3: 4, 5: 6, 6: 7, 7: 8}


def _fail(code: int) -> Exception:
    """pynvml's own error for ``code`` (NVMLError_InUse, NVMLError_InsufficientResources...)."""
    error: Exception = pynvml.NVMLError(code)
    return error


def _address(pointer: Any) -> int:
    return ctypes.cast(pointer, ctypes.c_void_p).value or 0


@dataclass
class _Gi:
    gi_id: int
    profile: MigProfile
    start: int
    size: int
    struct: Any
    cis: dict[int, Any] = field(default_factory=dict)  # ci id -> its struct

    @property
    def cells(self) -> set[int]:
        return set(range(self.start, self.start + self.size))


class NvmlMigStandIn:
    """A pynvml look-alike for one MIG GPU (see the module docstring for its rules)."""

    # pynvml's own names: the executor reads them from the module it is given
    NVMLError = pynvml.NVMLError
    NVML_GPU_INSTANCE_PROFILE_COUNT = pynvml.NVML_GPU_INSTANCE_PROFILE_COUNT
    NVML_COMPUTE_INSTANCE_PROFILE_COUNT = pynvml.NVML_COMPUTE_INSTANCE_PROFILE_COUNT
    c_nvmlGpuInstance_t = pynvml.c_nvmlGpuInstance_t
    c_nvmlComputeInstance_t = pynvml.c_nvmlComputeInstance_t
    c_nvmlGpuInstancePlacement_t = pynvml.c_nvmlGpuInstancePlacement_t

    def __init__(self, table: ProfileTable, uuid: str = "GPU-standin-0", mig_enabled: bool = True):
        self.table = table
        self.uuid = uuid
        self.mig_enabled = mig_enabled
        self._device_struct = pynvml.struct_c_nvmlDevice_t()
        self.device = ctypes.pointer(self._device_struct)
        self.gis: dict[int, _Gi] = {}
        self.processes: dict[tuple[int, int], list[int]] = {}  # (gi, ci) -> pids
        self.calls: list[tuple[Any, ...]] = []
        self._fail_next: dict[str, int] = {}
        self._mig_structs: list[Any] = []

    # -- test controls -----------------------------------------------------------------------
    def fail_next(self, fn: str, code: int) -> None:
        self._fail_next[fn] = code

    def _enter(self, fn: str) -> None:
        code = self._fail_next.pop(fn, None)
        if code is not None:
            raise _fail(code)

    def layout(self) -> list[tuple[str, int, bool]]:
        """(profile, start, has a compute instance) of every GPU instance, by start."""
        return sorted((g.profile.name, g.start, bool(g.cis)) for g in self.gis.values())

    def add_process(self, gi_id: int, ci_id: int, pid: int) -> None:
        self.processes.setdefault((gi_id, ci_id), []).append(pid)

    # -- lookups -----------------------------------------------------------------------------
    def _check_device(self, handle: Any) -> None:
        if _address(handle) != _address(self.device):
            raise _fail(pynvml.NVML_ERROR_INVALID_ARGUMENT)

    def _gi_of(self, handle: Any) -> _Gi:
        address = _address(handle)
        for gi in self.gis.values():
            if ctypes.addressof(gi.struct) == address:
                return gi
        raise _fail(pynvml.NVML_ERROR_INVALID_ARGUMENT)

    def _profile_by_id(self, profile_id: int) -> MigProfile:
        found = next((p for p in self.table.profiles if p.profile_id == profile_id), None)
        if found is None:
            raise _fail(pynvml.NVML_ERROR_INVALID_ARGUMENT)
        return found

    # -- pynvml functions --------------------------------------------------------------------
    def nvmlInit(self) -> None:
        pass

    def nvmlShutdown(self) -> None:
        pass

    def nvmlDeviceGetHandleByUUID(self, uuid: str) -> Any:
        if uuid != self.uuid:
            raise _fail(pynvml.NVML_ERROR_NOT_FOUND)
        return self.device

    def nvmlDeviceGetGpuInstanceProfileInfo(self, device: Any, index: int) -> Any:
        self._check_device(device)
        profile = next((p for p in self.table.profiles if p.profile_index == index), None)
        if profile is None:
            raise _fail(pynvml.NVML_ERROR_NOT_SUPPORTED)
        return SimpleNamespace(
            id=profile.profile_id,
            sliceCount=profile.slice_count,
            instanceCount=profile.instance_count,
            multiprocessorCount=profile.sm_count,
            memorySizeMB=profile.memory_mib,
            name=f"MIG {profile.name}",
        )

    def nvmlDeviceGetGpuInstancePossiblePlacements(
        self, device: Any, profile_id: int, array: Any, count: Any
    ) -> int:
        self._check_device(device)
        placements = self._profile_by_id(profile_id).placements
        count._obj.value = len(placements)
        if array is not None:
            for i, (start, size) in enumerate(placements):
                array[i].start, array[i].size = start, size
        return 0

    def nvmlDeviceGetGpuInstances(
        self, device: Any, profile_id: int, array: Any, count: Any
    ) -> int:
        self._check_device(device)
        if not self.mig_enabled:
            raise _fail(pynvml.NVML_ERROR_NOT_SUPPORTED)
        found = [g for g in sorted(self.gis.values(), key=lambda g: g.gi_id)]
        found = [g for g in found if g.profile.profile_id == profile_id]
        for i, gi in enumerate(found):
            array[i] = ctypes.pointer(gi.struct)
        count._obj.value = len(found)
        return 0

    def nvmlGpuInstanceGetInfo(self, handle: Any) -> Any:
        gi = self._gi_of(handle)
        info = pynvml.c_nvmlGpuInstanceInfo_t()
        info.id, info.profileId = gi.gi_id, gi.profile.profile_id
        info.placement.start, info.placement.size = gi.start, gi.size
        return info

    def nvmlDeviceGetGpuInstanceById(self, device: Any, gi_id: int) -> Any:
        self._check_device(device)
        gi = self.gis.get(gi_id)
        if gi is None:
            raise _fail(pynvml.NVML_ERROR_NOT_FOUND)
        return ctypes.pointer(gi.struct)

    def nvmlGpuInstanceGetComputeInstanceProfileInfo(
        self, handle: Any, index: int, engines: int
    ) -> Any:
        gi = self._gi_of(handle)
        slices = CI_SLICES.get(index)
        if slices is None or slices > gi.profile.slice_count:
            raise _fail(pynvml.NVML_ERROR_NOT_SUPPORTED)
        return SimpleNamespace(id=index, sliceCount=slices)

    def nvmlGpuInstanceGetComputeInstances(
        self, handle: Any, profile_id: int, array: Any, count: Any
    ) -> int:
        gi = self._gi_of(handle)
        full = CI_SLICES.get(profile_id) == gi.profile.slice_count
        found = sorted(gi.cis.items()) if full else []
        for i, (_, struct) in enumerate(found):
            array[i] = ctypes.pointer(struct)
        count._obj.value = len(found)
        return 0

    def _ci_of(self, handle: Any) -> tuple[_Gi, int]:
        address = _address(handle)
        for gi in self.gis.values():
            for ci_id, struct in gi.cis.items():
                if ctypes.addressof(struct) == address:
                    return gi, ci_id
        raise _fail(pynvml.NVML_ERROR_INVALID_ARGUMENT)

    def nvmlComputeInstanceGetInfo(self, handle: Any) -> Any:
        gi, ci_id = self._ci_of(handle)
        return SimpleNamespace(id=ci_id, gpuInstance=ctypes.pointer(gi.struct))

    def nvmlGpuInstanceGetComputeInstanceById(self, handle: Any, ci_id: int) -> Any:
        gi = self._gi_of(handle)
        struct = gi.cis.get(ci_id)
        if struct is None:
            raise _fail(pynvml.NVML_ERROR_NOT_FOUND)
        return ctypes.pointer(struct)

    def _mig_devices(self) -> list[tuple[int, int]]:
        return sorted((g.gi_id, c) for g in self.gis.values() for c in g.cis)

    def nvmlDeviceGetMaxMigDeviceCount(self, device: Any) -> int:
        self._check_device(device)
        return 7 if self.mig_enabled else 0

    def nvmlDeviceGetMigDeviceHandleByIndex(self, device: Any, index: int) -> Any:
        self._check_device(device)
        devices = self._mig_devices()
        if index >= len(devices):
            raise _fail(pynvml.NVML_ERROR_NOT_FOUND)
        struct = pynvml.struct_c_nvmlDevice_t()
        self._mig_structs.append((struct, devices[index]))
        return ctypes.pointer(struct)

    def nvmlDeviceGetComputeRunningProcesses(self, handle: Any) -> list[Any]:
        address = _address(handle)
        if address == _address(self.device):
            keys = list(self.processes)
        else:
            keys = [k for s, k in self._mig_structs if ctypes.addressof(s) == address]
        return [
            SimpleNamespace(pid=pid, usedGpuMemory=1 << 30)
            for key in keys
            for pid in self.processes.get(key, [])
        ]

    # -- the writes --------------------------------------------------------------------------
    def nvmlDeviceCreateGpuInstanceWithPlacement(
        self, device: Any, profile_id: int, placement_ref: Any
    ) -> Any:
        self._enter("nvmlDeviceCreateGpuInstanceWithPlacement")
        self._check_device(device)
        placement = placement_ref._obj  # NVML is given a pointer to the placement
        start, size = int(placement.start), int(placement.size)
        self.calls.append(("create_gi", profile_id, start, size))
        if not self.mig_enabled:
            raise _fail(pynvml.NVML_ERROR_NOT_SUPPORTED)
        profile = self._profile_by_id(profile_id)
        if profile.size_at(start) != size:
            raise _fail(pynvml.NVML_ERROR_INVALID_ARGUMENT)
        cells = set(range(start, start + size))
        if any(cells & g.cells for g in self.gis.values()):
            raise _fail(pynvml.NVML_ERROR_INSUFFICIENT_RESOURCES)
        same = sum(1 for g in self.gis.values() if g.profile.profile_id == profile_id)
        if same >= profile.instance_count:
            raise _fail(pynvml.NVML_ERROR_INSUFFICIENT_RESOURCES)
        gi_id = next(i for i in range(1, 64) if i not in self.gis)
        gi = _Gi(gi_id, profile, start, size, pynvml.struct_c_nvmlGpuInstance_t())
        self.gis[gi_id] = gi
        return ctypes.pointer(gi.struct)

    def nvmlGpuInstanceCreateComputeInstance(self, handle: Any, profile_id: int) -> Any:
        self._enter("nvmlGpuInstanceCreateComputeInstance")
        gi = self._gi_of(handle)
        self.calls.append(("create_ci", gi.gi_id, profile_id))
        if CI_SLICES.get(profile_id) != gi.profile.slice_count or gi.cis:
            raise _fail(pynvml.NVML_ERROR_INSUFFICIENT_RESOURCES)
        ci_id = 0
        gi.cis[ci_id] = pynvml.struct_c_nvmlComputeInstance_t()
        return ctypes.pointer(gi.cis[ci_id])

    def nvmlComputeInstanceDestroy(self, handle: Any) -> int:
        self._enter("nvmlComputeInstanceDestroy")
        gi, ci_id = self._ci_of(handle)
        self.calls.append(("destroy_ci", gi.gi_id, ci_id))
        if self.processes.get((gi.gi_id, ci_id)):
            raise _fail(pynvml.NVML_ERROR_IN_USE)
        del gi.cis[ci_id]
        return 0

    def nvmlGpuInstanceDestroy(self, handle: Any) -> int:
        self._enter("nvmlGpuInstanceDestroy")
        gi = self._gi_of(handle)
        self.calls.append(("destroy_gi", gi.gi_id))
        if gi.cis:
            raise _fail(pynvml.NVML_ERROR_IN_USE)
        del self.gis[gi.gi_id]
        return 0
