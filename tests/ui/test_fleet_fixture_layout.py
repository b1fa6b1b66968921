"""The UI tests' hand-made fleet holds only MIG layouts a real A100 can: each GPU's instances
pass the profile table's placement check (two 3g.40gb cover all 8 memory slices of an
A100-80GB, so 2 × 3g.40gb + 1g.10gb has no placement)."""

from __future__ import annotations

from collections import defaultdict

from gpucon.model.fleet import SlotKind
from gpucon.sim.catalog import A100_40GB, A100_80GB
from tests.ui.fleet_fixture import HandSource

TABLES = {"A100-SXM4-80GB": A100_80GB.profiles, "A100-SXM4-40GB": A100_40GB.profiles}


def test_every_mig_gpu_of_the_fixture_has_a_placement() -> None:
    layouts: dict[tuple[str, str], list[str]] = defaultdict(list)
    for slot in HandSource().read().slots:
        if slot.kind is SlotKind.MIG:
            assert slot.profile is not None
            layouts[(slot.gpu_uuid or "", slot.gpu_name or "")].append(slot.profile)
    assert len(layouts) == 2
    for (uuid, name), layout in layouts.items():
        table = TABLES[name]
        assert table is not None
        assert table.validate_layout(layout) == [], (uuid, layout)
        for slot in HandSource().read().slots:
            if slot.gpu_uuid == uuid and slot.profile is not None:
                # the memory an instance of that profile reports
                profile = table.by_name(slot.profile)
                assert profile is not None and slot.mem_total_mib == profile.memory_mib
