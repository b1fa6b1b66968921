"""MIG profile tables from the recordings in tests/fixtures/mig/ (``gpucon-mig-placements/1``).

``h200_live.json`` was read from the real H200 through NVML (tests/device/
mig_placements_read.py); the A100 and H100 files are transcribed from NVIDIA's tables
(tests/fixtures/mig/transcribe_tables.py says from where). ``table(key)`` turns one into the
``ProfileTable`` gpucon builds from NVML's answers, placements included.
"""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any

from gpucon.model.mig_profiles import MigProfile, ProfileTable, strip_mig_prefix

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "mig"
KEYS = ("a100_40gb", "a100_80gb", "h100_80gb", "h200_live")


@cache
def recording(key: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((FIXTURES / f"{key}.json").read_text())
    return data


def gpu_name(key: str) -> str:
    return str(recording(key)["gpus"][0]["name"]["result"])


def gpu_memory_mib(key: str) -> float:
    return int(recording(key)["gpus"][0]["memory"]["result"]["total"]) / (1024 * 1024)


def table(key: str) -> ProfileTable:
    """The recorded table: profiles NVML answered (refusals skipped) with their placements."""
    profiles = []
    for entry in recording(key)["gpus"][0]["profiles"]:
        info = entry["info"].get("result")
        if info is None:
            continue  # NVML refused this profile index (NotSupported): not on this GPU
        listed = (entry.get("placements") or {}).get("list_call", {}).get("result") or []
        profiles.append(
            MigProfile(
                name=strip_mig_prefix(str(info["name"])),
                profile_index=int(entry["profile_index"]),
                profile_id=int(info["id"]),
                slice_count=int(info["sliceCount"]),
                instance_count=int(info["instanceCount"]),
                sm_count=int(info["multiprocessorCount"]),
                memory_mib=int(info["memorySizeMB"]),
                copy_engines=int(info.get("copyEngineCount", 0)),
                placements=tuple((int(p["start"]), int(p["size"])) for p in listed),
            )
        )
    return ProfileTable(tuple(profiles))
