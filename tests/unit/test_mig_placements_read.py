"""The NVML source reads each profile's possible placements (the ctypes call NVML answers with
MIG off), here from the NVML stand-in holding each recorded table; a recording without them
(the older h200.json replay) gives a table without placements, and the layout check says so."""

from __future__ import annotations

import pytest
from msgspec.structs import replace

from gpucon.model.mig_layout import parse_layout
from gpucon.model.mig_placement import fit_layout
from gpucon.sources.nvml_calls import Garbage, NvmlCalls
from gpucon.sources.nvml_static import read_profile_table
from tests.helpers.mig_tables import KEYS, table
from tests.helpers.nvml_mig_standin import NvmlMigStandIn


@pytest.mark.parametrize("key", KEYS)
def test_the_source_reads_placements_as_nvml_gives_them(key: str) -> None:
    recorded = table(key)
    standin = NvmlMigStandIn(recorded)
    read = read_profile_table(NvmlCalls(standin), standin.device, Garbage())
    assert read is not None
    assert {p.name: p.placements for p in read.profiles} == {
        p.name: p.placements for p in recorded.profiles
    }
    assert read.has_placements and read.memory_slices == 8


def test_without_placements_the_check_names_what_it_could_not_check() -> None:
    bare = table("a100_80gb")
    unplaced = replace(bare, profiles=tuple(replace(p, placements=()) for p in bare.profiles))
    fit = fit_layout(unplaced, parse_layout("2x3g.40gb"), "A100")
    assert fit.ok and all(p.start is None for p in fit.placed)
    assert "placements are not known" in fit.note
