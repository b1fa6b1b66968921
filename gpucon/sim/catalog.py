"""Facts the simulated fleet is built from: GPU models, their MIG profile tables, served models.

GPU and MIG facts are the real ones (``nvidia-smi mig -lgip``): A100 slices have 14 SMs per
compute slice (1g=14, 2g=28, 3g=42, 4g=56, 7g=98), H200 slices 16 (7g=132). A100 memory per
profile is NVML's; H200 per-profile MiB are close estimates (the names are NVML's; the real
card's answers, read through NVML, are in tests/fixtures/mig/h200_live.json).

Service time of a model on a slot scales with the SMs it gets and the architecture's speed per
SM; up to ``concurrency`` requests run at once, each slowed by ``batch_slowdown`` per extra
co-running request. This is the same shape as ``gpucon.lab.service_time.ServiceTimeModel``.
"""

from __future__ import annotations

import msgspec

from gpucon.model.mig_profiles import MigProfile, ProfileTable

# SMs of a whole A100 (MIG off); model service times are given for it
A100_FULL_SMS = 108


class GpuType(msgspec.Struct, frozen=True, gc=False):
    """A GPU model the simulator knows: size, power and MIG profiles."""

    key: str
    name: str  # what NVML calls it
    sm_count: int
    memory_mib: int
    idle_w: float
    power_limit_w: float
    # speed of one SM relative to an A100 SM, for the models served here (fp16 inference)
    speed_per_sm: float
    profiles: ProfileTable | None = None


# NVML profile index -> its possible placements (start, size), as the real H200 answered
# nvmlDeviceGetGpuInstancePossiblePlacements (tests/fixtures/mig/h200_live.json): the same
# 8-memory-slice geometry on every MIG GPU NVIDIA publishes tables for
PLACEMENTS: dict[int, tuple[tuple[int, int], ...]] = {
    0: tuple((s, 1) for s in range(7)),
    7: tuple((s, 1) for s in range(7)),
    9: ((0, 2), (2, 2), (4, 2), (6, 2)),
    1: ((0, 2), (2, 2), (4, 2)),
    2: ((0, 4), (4, 4)),
    3: ((0, 4),),
    4: ((0, 8),),
}


def _table(rows: tuple[tuple[str, int, int, int, int, int, int], ...]) -> ProfileTable:
    """Rows of (name, profile index, profile id, slices, instances, SMs, MiB)."""
    return ProfileTable(
        tuple(
            MigProfile(
                name,
                index,
                pid,
                slices,
                count,
                sms,
                mib,
                copy_engines=slices,
                placements=PLACEMENTS.get(index, ()),
            )
            for name, index, pid, slices, count, sms, mib in rows
        )
    )


A100_80GB = GpuType(
    "a100-80gb",
    "NVIDIA A100-SXM4-80GB",
    108,
    81920,
    60.0,
    400.0,
    1.0,
    _table(
        (
            ("1g.10gb", 0, 19, 1, 7, 14, 9728),
            ("1g.10gb+me", 7, 20, 1, 1, 14, 9728),
            ("1g.20gb", 9, 15, 1, 4, 14, 19968),
            ("2g.20gb", 1, 14, 2, 3, 28, 19968),
            ("3g.40gb", 2, 9, 3, 2, 42, 40192),
            ("4g.40gb", 3, 5, 4, 1, 56, 40192),
            ("7g.80gb", 4, 0, 7, 1, 98, 81152),
        )
    ),
)
A100_40GB = GpuType(
    "a100-40gb",
    "NVIDIA A100-PCIE-40GB",
    108,
    40960,
    35.0,
    250.0,
    1.0,
    _table(
        (
            ("1g.5gb", 0, 19, 1, 7, 14, 4864),
            ("1g.5gb+me", 7, 20, 1, 1, 14, 4864),
            ("1g.10gb", 9, 15, 1, 4, 14, 9856),
            ("2g.10gb", 1, 14, 2, 3, 28, 9856),
            ("3g.20gb", 2, 9, 3, 2, 42, 20096),
            ("4g.20gb", 3, 5, 4, 1, 56, 20096),
            ("7g.40gb", 4, 0, 7, 1, 98, 40320),
        )
    ),
)
H200 = GpuType(
    "h200",
    "NVIDIA H200",
    132,
    143771,
    75.0,
    700.0,
    1.6,
    _table(
        (
            ("1g.18gb", 0, 19, 1, 7, 16, 17920),
            ("1g.18gb+me", 7, 20, 1, 1, 16, 17920),
            ("1g.35gb", 9, 15, 1, 4, 26, 35328),  # 26 SMs, as the real H200 answered
            ("2g.35gb", 1, 14, 2, 3, 32, 35328),
            ("3g.71gb", 2, 9, 3, 2, 60, 72192),
            ("4g.71gb", 3, 5, 4, 1, 64, 72192),
            ("7g.141gb", 4, 0, 7, 1, 132, 143616),
        )
    ),
)
RTX_4090 = GpuType("rtx-4090", "NVIDIA GeForce RTX 4090", 128, 24564, 20.0, 450.0, 0.68)

GPU_TYPES: dict[str, GpuType] = {t.key: t for t in (A100_80GB, A100_40GB, H200, RTX_4090)}


def mig_profile(gpu: GpuType, name: str) -> MigProfile:
    """The named profile of a MIG-capable GPU; ValueError naming both when it has none."""
    found = gpu.profiles.by_name(name) if gpu.profiles is not None else None
    if found is None:
        raise ValueError(f"GPU {gpu.name!r} has no MIG profile {name!r}")
    return found


class ModelSpec(msgspec.Struct, frozen=True, gc=False):
    """An inference model as the simulated servers run it."""

    name: str  # the model name in the registry and in Triton's metrics
    full_a100_s: float  # one request alone on a whole A100
    weights_mib: float
    activation_mib: float  # per request computing
    sms_per_request: float  # SMs one concurrent request uses well (sets the concurrency)
    batch_slowdown: float  # fractional slowdown per extra co-running request
    compute_cv: float  # spread of compute time (diffusion: fixed steps, small)
    slo_p95_ms: float
    max_concurrency: int = 16


MODELS: dict[str, ModelSpec] = {
    m.name: m
    for m in (
        ModelSpec("sdxl", 3.0, 7300.0, 3200.0, 40.0, 0.8, 0.06, 14000.0, 4),
        ModelSpec("sd15", 0.8, 2600.0, 1100.0, 21.0, 0.8, 0.06, 10000.0, 4),
        ModelSpec("bert-base", 0.004, 900.0, 60.0, 7.0, 0.25, 0.3, 80.0),
        ModelSpec("resnet50", 0.0025, 700.0, 40.0, 3.5, 0.2, 0.3, 60.0),
    )
}

# p95 SLO per model, for the hub (``Hub(slo_p95_ms_by_model=...)``) when showing the demo
DEMO_SLO_P95_MS: dict[str, float] = {m.name: m.slo_p95_ms for m in MODELS.values()}

# a CUDA context with the server's runtime, per process
CONTEXT_MIB = 520.0


def concurrency(model: ModelSpec, sm_count: float) -> int:
    """Requests a server computes at once on ``sm_count`` SMs (its instance/batch count)."""
    return max(1, min(model.max_concurrency, round(sm_count / model.sms_per_request)))


def service_time_s(model: ModelSpec, sm_count: float, speed_per_sm: float) -> float:
    """Seconds one request takes alone on ``sm_count`` SMs of a GPU with ``speed_per_sm``."""
    # nearly linear in SMs: small slices lose a little less than their share
    return float(model.full_a100_s * (A100_FULL_SMS / (sm_count * speed_per_sm)) ** 0.9)
