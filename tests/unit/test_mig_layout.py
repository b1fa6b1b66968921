"""MIG layouts: the string form, mig-parted config files, and placement on the recorded tables
(the H200's read from the real card, the A100/H100 ones transcribed from NVIDIA's tables)."""

from __future__ import annotations

import pytest

from gpucon.model.mig_layout import LayoutError, LayoutItem, format_layout, parse_layout
from gpucon.model.mig_parted import MigPartedError, layout_for, parse_config
from gpucon.model.mig_placement import fit_layout
from tests.helpers.mig_tables import KEYS, gpu_name, recording, table


def test_layout_strings_as_operators_write_them() -> None:
    assert parse_layout("2x3g.40gb+1x1g.10gb") == (
        LayoutItem("3g.40gb"),
        LayoutItem("3g.40gb"),
        LayoutItem("1g.10gb"),
    )
    assert parse_layout("2×3g.40gb, 1*1g.10gb+me") == (
        LayoutItem("3g.40gb"),
        LayoutItem("3g.40gb"),
        LayoutItem("1g.10gb+me"),
    )
    assert parse_layout("MIG 4g.40gb@0 + 1g.10gb+me@5") == (
        LayoutItem("4g.40gb", 0),
        LayoutItem("1g.10gb+me", 5),
    )
    assert format_layout(parse_layout("2x3g.40gb+1g.10gb@6")) == "2x3g.40gb+1g.10gb@6"


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("", "empty"),
        ("3g.40gb++1g.10gb", "item 2 is empty"),
        ("3x", "expected a profile"),
        ("2x3g.40gb@0", "names one instance"),
        ("3g.40gb@x", "start slice"),
        ("nvidia", "expected a profile"),
        ("3g.40gb\x1b[31m", "control characters"),
        ("+".join(["1g.10gb"] * 17), "more than 16"),
    ],
)
def test_bad_layouts_are_refused_by_item(text: str, says: str) -> None:
    with pytest.raises(LayoutError, match=says.replace("(", r"\(")):
        parse_layout(text)


@pytest.mark.parametrize("key", KEYS)
def test_every_recorded_table_has_the_mig_geometry(key: str) -> None:
    t = table(key)
    assert t.total_slices == 7 and t.memory_slices == 8 and t.has_placements
    full = next(p for p in t.profiles if p.slice_count == 7)
    assert fit_layout(t, [LayoutItem(full.name)], gpu_name(key)).ok
    one = next(p for p in t.profiles if p.slice_count == 1 and p.instance_count == 7)
    fit = fit_layout(t, [LayoutItem(one.name)] * 7, gpu_name(key))
    assert [p.start for p in fit.placed] == list(range(7))
    assert not fit_layout(t, [LayoutItem(one.name)] * 8, gpu_name(key)).ok


def test_the_h200_table_is_what_the_real_card_answered() -> None:
    meta = recording("h200_live")["meta"]
    assert meta["driver"] == "580.159.04" and "RECORDED from the real NVIDIA H200" in meta["label"]
    t = table("h200_live")
    three = t.by_name("3g.71gb")
    assert three is not None and three.placements == ((0, 4), (4, 4)) and three.sm_count == 60
    double = t.by_name("1g.35gb")
    assert double is not None and double.placements == ((0, 2), (2, 2), (4, 2), (6, 2))
    assert double.sm_count == 26  # not 16: the recording corrects what one might assume


def test_the_errors_name_the_problem() -> None:
    h200 = table("h200_live")
    fit = fit_layout(h200, parse_layout("3x3g.71gb"), "NVIDIA H200")
    assert "3 × 3g.71gb needs 9 of 7 slices on NVIDIA H200" in fit.problems
    a100 = table("a100_80gb")
    fit = fit_layout(a100, parse_layout("1g.10gb@7+4g.40gb@0"), "A100")
    assert fit.problems[0].startswith("1g.10gb cannot start at slice 7 with 4g.40gb at 0")
    fit = fit_layout(a100, parse_layout("4g.40gb@0+1g.10gb@2"), "A100")
    assert fit.problems == (
        "1g.10gb cannot start at slice 2 with 4g.40gb at 0: slice(s) 2 are taken",
    )
    fit = fit_layout(a100, parse_layout("2x3g.40gb+1g.20gb"), "A100")
    assert "no placement of 2 × 3g.40gb + 1 × 1g.20gb fits on A100" in fit.problems[0]
    assert "1g.20gb has no free start" in fit.problems[0]
    fit = fit_layout(a100, parse_layout("5g.50gb"), "A100")
    assert "has no profile '5g.50gb'" in fit.problems[0]


def test_two_3g_instances_leave_no_room_for_a_1g_one() -> None:
    """3g covers 4 of the 8 memory slices wherever it starts (the H200 said so, and NVIDIA's
    tables agree): 2 × 3g + 1 × 1g adds up to 7 compute slices but has no placement."""
    a100 = table("a100_80gb")
    assert not fit_layout(a100, parse_layout("2x3g.40gb+1x1g.10gb"), "A100").ok
    fit = fit_layout(a100, parse_layout("3g.40gb+2g.20gb+2x1g.10gb"), "A100")
    assert [(p.profile.name, p.start) for p in fit.placed] == [
        ("2g.20gb", 0),
        ("1g.10gb", 2),
        ("1g.10gb", 3),
        ("3g.40gb", 4),
    ]


PARTED = """
version: v1
mig-configs:
  all-disabled:
    - devices: all
      mig-enabled: false
  all-balanced:
    - device-filter: ["0x20B010DE"]
      devices: all
      mig-enabled: true
      mig-devices: {"1g.5gb": 2, "2g.10gb": 1, "3g.20gb": 1}
    - device-filter: ["0x20B210DE"]
      devices: all
      mig-enabled: true
      mig-devices: {"1g.10gb": 2, "2g.20gb": 1, "3g.40gb": 1}
  split:
    - devices: [0]
      mig-enabled: true
      mig-devices: {"7g.80gb": 1}
    - devices: [1, 2]
      mig-enabled: true
      mig-devices: {"3g.40gb": 2}
"""


def test_mig_parted_configs_pick_the_entry_for_the_gpu() -> None:
    configs = parse_config(PARTED)
    a100 = table("a100_80gb")

    def known(name: str) -> bool:
        return a100.by_name(name) is not None

    choice = layout_for(configs, "all-balanced", 0, known)
    assert choice.entry == 1 and "device-filter" in choice.why
    assert format_layout(choice.items) == "2x1g.10gb+1x2g.20gb+1x3g.40gb"
    assert fit_layout(a100, choice.items, "A100").ok
    assert format_layout(layout_for(configs, "split", 2, known).items) == "2x3g.40gb"
    disabled = layout_for(configs, "all-disabled", 0, known)
    assert not disabled.mig_enabled and disabled.items == ()
    with pytest.raises(MigPartedError, match="no config 'nope'"):
        layout_for(configs, "nope", 0, known)
    with pytest.raises(MigPartedError, match="no entry for GPU 3"):
        layout_for(configs, "split", 3, known)


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("version: v2\nmig-configs: {a: []}", "version"),
        ("[1, 2", "not YAML"),
        (
            "version: v1\nmig-configs: {a: [{devices: all, mig-enabled: true, "
            "mig-devices: {'1g.10gb': -1}}]}",
            "count from 0",
        ),
        ("version: v1\nmig-configs: {a: 3}", "list of entries"),
    ],
)
def test_bad_mig_parted_files_are_refused_by_key(text: str, says: str) -> None:
    with pytest.raises(MigPartedError, match=says):
        layout_for(parse_config(text), "a", 0, lambda _: True)
