"""The MIG profile table (gpucon.model.mig_profiles) the NVML source builds."""

from __future__ import annotations

from gpucon.model.mig_profiles import ProfileTable, profile_name, table_from


def a100_80gb() -> ProfileTable:
    """The A100-80GB's real profile table, as the simulator's catalog holds it (one copy)."""
    from gpucon.sim.catalog import A100_80GB

    assert A100_80GB.profiles is not None
    return A100_80GB.profiles


def test_conventional_names() -> None:
    assert profile_name(3, 40192) == "3g.40gb"
    assert profile_name(1, 9728) == "1g.10gb"
    assert profile_name(1, 4864) == "1g.5gb"
    assert profile_name(7, 143360) == "7g.140gb"  # NVML's own name (7g.141gb) wins when given


def test_lookup_and_match() -> None:
    table = a100_80gb()
    assert table.total_slices == 7
    assert table.by_name("MIG 3g.40gb") == table.by_name("3g.40gb")
    assert table.by_name("5g.50gb") is None
    plain = table.match(1, 9700)
    assert plain is not None and plain.name == "1g.10gb"  # not the +me variant
    match = table.match(1, 19900)
    assert match is not None and match.name == "1g.20gb"
    assert table.match(3, 20000) is None


def test_validate_layout() -> None:
    table = a100_80gb()
    assert table.validate_layout(["3g.40gb", "2g.20gb", "1g.10gb"]) == []
    assert table.validate_layout(["4g.40gb", "2g.20gb", "1g.10gb"]) == []
    assert table.validate_layout(["1g.10gb"] * 7) == []
    problems = table.validate_layout(["3g.40gb", "9g.99gb", "4g.40gb", "2g.20gb"])
    assert problems[0].startswith("layout[1]: unknown profile '9g.99gb'; this GPU offers 1g.10gb")
    assert "9 compute slices requested but the GPU has 7" in problems[-1]
    assert table.validate_layout(["2g.20gb"] * 4) == [
        "layout: 4× 2g.20gb but at most 3 fit",
        "layout: 8 compute slices requested but the GPU has 7",
    ]
    assert table.validate_layout([]) == ["layout is empty: name at least one profile"]


def test_validate_layout_refuses_a_layout_with_no_placement() -> None:
    # 7 compute slices, but an A100's 8 memory slices: each 3g.40gb covers 4 (starts 0 or 4),
    # so two leave no start for the 1g.10gb (NVIDIA's MIG user guide, "Supported MIG Profiles")
    table = a100_80gb()
    (problem,) = table.validate_layout(["3g.40gb", "3g.40gb", "1g.10gb"])
    assert problem.startswith("layout: no placement of 2 × 3g.40gb + 1 × 1g.10gb fits")
    assert table.validate_layout(["3g.40gb", "3g.40gb"]) == []  # 4 memory slices each
    assert table.validate_layout(["4g.40gb", "3g.40gb"]) == []


def test_no_profiles_is_no_table() -> None:
    assert table_from([]) is None
