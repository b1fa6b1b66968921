"""The NVML source's slow fields: what changes rarely and is read every ``slow_cadence_s``.

Per GPU: handle, UUID, name, MIG mode, the MIG devices (GPU/compute instance ids, profile, SM
count, memory), power limit, SM/memory clocks, SM count. Read once per GPU for the session:
the GPU-instance profile table and whether GPM is supported.
"""

from __future__ import annotations

import ctypes
from collections.abc import Mapping
from typing import Any

import msgspec
from msgspec.structs import replace

from gpucon.model.mig_profiles import (
    MigProfile,
    ProfileTable,
    profile_name,
    strip_mig_prefix,
    table_from,
)
from gpucon.sources.nvml_calls import ERROR_INVALID_ARGUMENT, Garbage, NvmlCalls
from gpucon.sources.nvml_gpm import GpmSampler

_INVALID = frozenset({ERROR_INVALID_ARGUMENT})
# NVML_GPU_INSTANCE_PROFILE_COUNT of bindings older than the ones we were written against
_DEFAULT_PROFILE_COUNT = 9
_NVML_CLOCK_SM = 1
_NVML_CLOCK_MEM = 2


class MigDevice(msgspec.Struct, frozen=True):
    handle: Any
    index: int
    gi_id: int
    ci_id: int | None
    profile: str | None
    sm_count: int | None
    memory_mib: float | None


class GpuStatic(msgspec.Struct, frozen=True):
    index: int
    handle: Any
    uuid: str
    name: str | None
    mig_enabled: bool | None
    mig_devices: tuple[MigDevice, ...]
    power_limit_w: float | None
    sm_clock_mhz: float | None
    mem_clock_mhz: float | None
    sm_count: int | None
    profiles: ProfileTable | None
    gpm_supported: bool


def read_statics(
    calls: NvmlCalls,
    gpm: GpmSampler,
    garbage: Garbage,
    previous: Mapping[str, GpuStatic] | None = None,
) -> tuple[GpuStatic, ...]:
    """The slow fields of every GPU; raises NvmlCallError when the GPUs cannot be listed."""
    count = garbage.integer(calls.get("nvmlDeviceGetCount", remember=False), "GPU count")
    previous = previous or {}
    statics = []
    for index in range(count or 0):
        handle = calls.get("nvmlDeviceGetHandleByIndex", index, remember=False)
        if handle is None:
            continue
        uuid = garbage.text(calls.get("nvmlDeviceGetUUID", handle), "uuid") or f"gpu{index}"
        statics.append(_read_static(calls, gpm, garbage, index, handle, uuid, previous.get(uuid)))
    return tuple(statics)


def _read_static(
    calls: NvmlCalls,
    gpm: GpmSampler,
    garbage: Garbage,
    index: int,
    handle: Any,
    uuid: str,
    before: GpuStatic | None,
) -> GpuStatic:
    mode = calls.get("nvmlDeviceGetMigMode", handle)
    mig_enabled = None if not mode else bool(mode[0])
    profiles = before.profiles if before is not None else read_profile_table(calls, handle, garbage)
    limit_mw = calls.get(
        ["nvmlDeviceGetEnforcedPowerLimit", "nvmlDeviceGetPowerManagementLimit"], handle
    )
    limit = garbage.number(limit_mw, "power limit", 0, 10_000_000)
    attributes = calls.get("nvmlDeviceGetAttributes", handle)
    sm_count = garbage.integer(getattr(attributes, "multiprocessorCount", None), "SM count")
    if sm_count is None and profiles is not None:
        sm_count = max(p.sm_count for p in profiles.profiles)
    return GpuStatic(
        index=index,
        handle=handle,
        uuid=uuid,
        name=garbage.text(calls.get("nvmlDeviceGetName", handle), "name"),
        mig_enabled=mig_enabled,
        mig_devices=read_mig_devices(calls, handle, profiles, garbage) if mig_enabled else (),
        power_limit_w=None if limit is None else limit / 1000.0,
        sm_clock_mhz=garbage.number(
            calls.get("nvmlDeviceGetClockInfo", handle, _NVML_CLOCK_SM), "SM clock", 0, 100_000
        ),
        mem_clock_mhz=garbage.number(
            calls.get("nvmlDeviceGetClockInfo", handle, _NVML_CLOCK_MEM), "mem clock", 0, 100_000
        ),
        sm_count=sm_count,
        profiles=profiles,
        gpm_supported=before.gpm_supported if before is not None else gpm.supported(handle),
    )


def read_profile_table(calls: NvmlCalls, handle: Any, garbage: Garbage) -> ProfileTable | None:
    """Every GPU-instance profile NVML describes for this GPU (answers with MIG off too)."""
    count = getattr(calls.nvml, "NVML_GPU_INSTANCE_PROFILE_COUNT", _DEFAULT_PROFILE_COUNT)
    found: list[MigProfile] = []
    for profile_index in range(count):
        info = calls.get(
            [
                ("nvmlDeviceGetGpuInstanceProfileInfo", (handle, profile_index)),
                ("nvmlDeviceGetGpuInstanceProfileInfo", (handle, profile_index, 1)),
            ],
            handle,
            profile_index,
            extra_na=_INVALID,
        )
        if info is None:
            if profile_index == 0 and not found:
                return None  # no MIG at all on this GPU: don't ask for the others
            continue
        profile = _profile(info, profile_index, garbage)
        if profile is not None:
            placements = read_placements(calls.nvml, handle, profile.profile_id)
            found.append(replace(profile, placements=placements))
    return table_from(found)


_MOST_PLACEMENTS = 16  # one per memory slice is 8 on every MIG GPU so far


def read_placements(nvml: Any, handle: Any, profile_id: int) -> tuple[tuple[int, int], ...]:
    """Where the profile's instances may start and the slices each covers
    (``nvmlDeviceGetGpuInstancePossiblePlacements_v2``: it answers with MIG off, as the H200
    here did); () when these bindings or this GPU cannot say. Read once per GPU."""
    function = getattr(nvml, "nvmlDeviceGetGpuInstancePossiblePlacements", None)
    struct = getattr(nvml, "c_nvmlGpuInstancePlacement_t", None)
    if function is None or struct is None:
        return ()
    array = (struct * _MOST_PLACEMENTS)()
    count = ctypes.c_uint(_MOST_PLACEMENTS)
    try:
        function(handle, profile_id, array, ctypes.byref(count))
    except Exception:  # old driver, NotSupported, a recording without it: no placements known
        return ()
    shown = min(int(count.value), _MOST_PLACEMENTS)
    return tuple((int(array[i].start), int(array[i].size)) for i in range(shown))


def _profile(info: Any, profile_index: int, garbage: Garbage) -> MigProfile | None:
    slices = garbage.integer(getattr(info, "sliceCount", None), "profile slices")
    memory = garbage.integer(getattr(info, "memorySizeMB", None), "profile memory")
    if not slices or memory is None:
        return None
    named = garbage.text(getattr(info, "name", None), "profile name")

    def count(field: str) -> int:
        return garbage.integer(getattr(info, field, 0), f"profile {field}") or 0

    return MigProfile(
        name=strip_mig_prefix(named) if named else profile_name(slices, memory),
        profile_index=profile_index,
        profile_id=count("id"),
        slice_count=slices,
        instance_count=count("instanceCount"),
        sm_count=count("multiprocessorCount"),
        memory_mib=memory,
        copy_engines=count("copyEngineCount"),
        decoders=count("decoderCount"),
        encoders=count("encoderCount"),
        jpeg=count("jpegCount"),
        ofa=count("ofaCount"),
    )


def read_mig_devices(
    calls: NvmlCalls, handle: Any, profiles: ProfileTable | None, garbage: Garbage
) -> tuple[MigDevice, ...]:
    """The MIG devices (one per compute instance) that exist on a MIG-enabled GPU."""
    most = garbage.integer(calls.get("nvmlDeviceGetMaxMigDeviceCount", handle), "MIG count")
    devices: list[MigDevice] = []
    seen_gi: set[int] = set()
    for index in range(most or 0):
        mig = calls.get(
            "nvmlDeviceGetMigDeviceHandleByIndex", handle, index, extra_na=_INVALID, remember=False
        )
        if mig is None:
            continue
        gi_id = garbage.integer(calls.get("nvmlDeviceGetGpuInstanceId", mig), "GPU instance id")
        if gi_id is None or gi_id in seen_gi:
            continue  # a second compute instance of one GPU instance is the same slot
        seen_gi.add(gi_id)
        ci_id = garbage.integer(calls.get("nvmlDeviceGetComputeInstanceId", mig), "CI id")
        attributes = calls.get("nvmlDeviceGetAttributes", mig)
        slices = garbage.integer(getattr(attributes, "gpuInstanceSliceCount", None), "slices")
        memory = garbage.number(getattr(attributes, "memorySizeMB", None), "MIG memory")
        profile = None
        if slices and memory is not None:
            matched = profiles.match(slices, memory) if profiles is not None else None
            profile = matched.name if matched is not None else profile_name(slices, memory)
        devices.append(
            MigDevice(
                handle=mig,
                index=index,
                gi_id=gi_id,
                ci_id=ci_id,
                profile=profile,
                sm_count=garbage.integer(
                    getattr(attributes, "multiprocessorCount", None), "MIG SM count"
                ),
                memory_mib=memory,
            )
        )
    return tuple(devices)
