"""MIG layouts under fuzzing: any text is a layout or a LayoutError naming the item; any
mig-parted text is a config or a MigPartedError; and the placement search agrees with a
brute-force check over every combination of starts on the recorded profile tables."""

from __future__ import annotations

import itertools

from hypothesis import event, given
from hypothesis import strategies as st

from gpucon.model.mig_layout import LayoutError, LayoutItem, format_layout, parse_layout
from gpucon.model.mig_parted import MigPartedError, layout_for, parse_config
from gpucon.model.mig_placement import fit_layout
from gpucon.model.mig_profiles import ProfileTable
from tests.fuzz.strategies import hostile_text
from tests.helpers.mig_tables import KEYS, table

TABLES = {key: table(key) for key in KEYS}
PIECES = st.sampled_from(
    ["1g.10gb", "3g.40gb", "+", ",", "x", "×", "@", "2", "7", "+me", " ", "MIG ", "g.", "gb"]
)


@given(st.one_of(hostile_text, st.lists(PIECES, max_size=12).map("".join)))
def test_any_text_is_a_layout_or_refused_by_item(text: str) -> None:
    try:
        items = parse_layout(text)
    except LayoutError as exc:
        event("refused")
        assert "\x1b" not in str(exc)
        return
    event("parsed")
    assert 1 <= len(items) <= 16
    # the written form reads back as the same instances (counted items first)
    assert sorted(map(str, parse_layout(format_layout(items)))) == sorted(map(str, items))


def _exists(t: ProfileTable, names: list[str]) -> bool:
    """Brute force: some combination of allowed starts with no two instances overlapping."""
    profiles = [t.by_name(n) for n in names]
    if any(p is None for p in profiles):
        return False
    if sum(p.slice_count for p in profiles if p) > t.total_slices:
        return False
    for choice in itertools.product(*(p.placements for p in profiles if p)):
        cells = [c for start, size in choice for c in range(start, start + size)]
        if len(cells) == len(set(cells)):
            return True
    return False


@given(
    st.sampled_from(KEYS),
    st.lists(st.integers(min_value=0, max_value=6), min_size=1, max_size=8),
)
def test_the_search_agrees_with_brute_force(key: str, picks: list[int]) -> None:
    t = TABLES[key]
    names = [t.profiles[i % len(t.profiles)].name for i in picks]
    fit = fit_layout(t, [LayoutItem(n) for n in names], key)
    counts_ok = all(names.count(p.name) <= p.instance_count for p in t.profiles)
    event("fits" if fit.ok else "refused")
    assert fit.ok == (_exists(t, names) and counts_ok), (names, fit.problems)
    if fit.ok:
        assert sorted(p.profile.name for p in fit.placed) == sorted(names)
        taken: set[int] = set()
        for placed in fit.placed:
            assert placed.start in placed.profile.starts
            assert not (placed.slices & taken)
            taken |= placed.slices
    else:
        assert fit.problems and all(key in p for p in fit.problems)


@given(hostile_text)
def test_any_mig_parted_text_is_a_config_or_refused(text: str) -> None:
    try:
        configs = parse_config(f"version: v1\nmig-configs:\n  a:\n    - {text}\n")
        layout_for(configs, "a", 0, lambda _: True)
    except MigPartedError as exc:
        event("refused")
        assert str(exc)
        return
    event("accepted")
