"""On the real GPU (device tool): the NVML source reads the profile table WITH placements, and
they are what tests/fixtures/mig/h200_live.json recorded from this card (read only: MIG is
never enabled, no instance is created)."""

from __future__ import annotations

import pytest

from gpucon.sources.nvml import NvmlSource
from tests.helpers.mig_tables import table


def test_the_source_reads_the_h200_placements_as_recorded() -> None:
    reading = NvmlSource(host="devhost").read()
    h200 = [g for g in reading.gpus if g.name and "H200" in g.name]
    if not h200:
        pytest.skip("no H200 here")
    recorded = {p.name: p.placements for p in table("h200_live").profiles}
    for gpu in h200:
        assert gpu.mig_profiles is not None
        read = {p.name: p.placements for p in gpu.mig_profiles.profiles}
        assert read == recorded
