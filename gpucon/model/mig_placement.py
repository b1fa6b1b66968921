"""Where a layout's GPU instances go: an exact search over the profile table's placements.

A MIG GPU has 8 memory slices and 7 compute slices. Each profile may start only at the slices
NVML lists for it (``nvmlDeviceGetGpuInstancePossiblePlacements``) and then covers ``size``
memory slices; two instances may not overlap. The space is small (at most 8 slices, a handful
of instances), so the search tries every start in order, largest instances first, and either
returns one placement per instance or says why none exists, naming the profile, the slices
and what holds them: "3 × 3g.71gb needs 9 of 7 slices on NVIDIA H200", "1g.10gb cannot start
at slice 7 with 4g.40gb at 0 (it may start at 0, 1, 2, 3, 4, 5, 6)". Pure: no IO.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

import msgspec

from gpucon.model.mig_layout import LayoutItem, describe_counts
from gpucon.model.mig_profiles import MigProfile, ProfileTable


class PlacedInstance(msgspec.Struct, frozen=True, gc=False):
    """One GPU instance of a layout, where it goes (``start`` None: placements not known)."""

    profile: MigProfile
    start: int | None
    size: int | None

    def describe(self) -> str:
        return self.profile.name if self.start is None else f"{self.profile.name} at {self.start}"

    @property
    def slices(self) -> frozenset[int]:
        if self.start is None or self.size is None:
            return frozenset()
        return frozenset(range(self.start, self.start + self.size))


class LayoutFit(msgspec.Struct, frozen=True, gc=False):
    """The placements found (in start order), or the problems that stop the layout."""

    placed: tuple[PlacedInstance, ...] = ()
    problems: tuple[str, ...] = ()
    note: str = ""

    @property
    def ok(self) -> bool:
        return not self.problems and bool(self.placed)


def _starts_text(profile: MigProfile) -> str:
    return ", ".join(str(s) for s in profile.starts) or "nowhere"


def _count_problems(
    table: ProfileTable, profiles: Sequence[MigProfile], gpu_name: str
) -> list[str]:
    problems = []
    used = sum(p.slice_count for p in profiles)
    total = table.total_slices
    if total and used > total:
        what = describe_counts(p.name for p in profiles)
        problems.append(f"{what} needs {used} of {total} slices on {gpu_name}")
    for name, count in Counter(p.name for p in profiles).items():
        profile = table.by_name(name)
        if profile is not None and count > profile.instance_count:
            problems.append(
                f"{count} × {name} but at most {profile.instance_count} fit on {gpu_name}"
            )
    return problems


def _pinned(
    pinned: list[tuple[MigProfile, int]], gpu_name: str
) -> tuple[list[PlacedInstance], list[str]]:
    """The instances the layout pins (``@start``), each checked against its starts and the
    others pinned before it."""
    placed: list[PlacedInstance] = []
    problems: list[str] = []
    for profile, start in pinned:
        size = profile.size_at(start)
        others = " and ".join(p.describe() for p in placed)
        with_others = f" with {others}" if others else ""
        if size is None:
            problems.append(
                f"{profile.name} cannot start at slice {start}{with_others} on {gpu_name} "
                f"(it may start at {_starts_text(profile)})"
            )
            continue
        here = PlacedInstance(profile, start, size)
        clash = next((p for p in placed if p.slices & here.slices), None)
        if clash is not None:
            taken = ", ".join(str(s) for s in sorted(clash.slices & here.slices))
            problems.append(
                f"{profile.name} cannot start at slice {start} with {clash.describe()}: "
                f"slice(s) {taken} are taken"
            )
            continue
        placed.append(here)
    return placed, problems


def _search(
    fixed: list[PlacedInstance], todo: list[MigProfile]
) -> tuple[list[PlacedInstance] | None, list[PlacedInstance], MigProfile | None]:
    """Every remaining instance placed (or None), plus the deepest partial placement and the
    profile it could not place (for the explanation)."""
    best: list[PlacedInstance] = list(fixed)
    stuck: MigProfile | None = todo[0] if todo else None

    def go(
        placed: list[PlacedInstance], rest: list[MigProfile], used: frozenset[int], floor: int
    ) -> list[PlacedInstance] | None:
        nonlocal best, stuck
        if not rest:
            return placed
        profile, tail = rest[0], rest[1:]
        if len(placed) > len(best):
            best, stuck = list(placed), profile
        for start, size in sorted(profile.placements):
            if start < floor:
                continue  # same profile as the one before: starts ascending (no repeats)
            cells = frozenset(range(start, start + size))
            if cells & used:
                continue
            nxt = start if tail and tail[0].name == profile.name else 0
            found = go([*placed, PlacedInstance(profile, start, size)], tail, used | cells, nxt)
            if found is not None:
                return found
        return None

    taken = frozenset().union(*(p.slices for p in fixed)) if fixed else frozenset()
    return go(list(fixed), todo, taken, 0), best, stuck


def fit_layout(table: ProfileTable, items: Sequence[LayoutItem], gpu_name: str) -> LayoutFit:
    """Placements for every item of the layout on an empty GPU, or why there are none."""
    if not items:
        return LayoutFit(problems=("the layout is empty: name at least one profile",))
    problems: list[str] = []
    profiles: list[MigProfile] = []
    pinned: list[tuple[MigProfile, int]] = []
    free: list[MigProfile] = []
    for position, item in enumerate(items):
        profile = table.by_name(item.profile)
        if profile is None:
            problems.append(
                f"item {position + 1}: {gpu_name} has no profile {item.profile!r} "
                f"(it offers {', '.join(table.names()) or 'none'})"
            )
            continue
        profiles.append(profile)
        if item.start is None:
            free.append(profile)
        else:
            pinned.append((profile, item.start))
    problems.extend(_count_problems(table, profiles, gpu_name))
    if problems:
        return LayoutFit(problems=tuple(problems))
    if not table.has_placements:
        unplaced = tuple(PlacedInstance(p, None, None) for p in profiles)
        note = f"{gpu_name}'s placements are not known: NVML places the instances itself"
        return LayoutFit(placed=unplaced, note=note)
    # pins at a start their profile allows go first: a bad pin is then named beside them
    pinned.sort(key=lambda pin: pin[0].size_at(pin[1]) is None)
    fixed, pin_problems = _pinned(pinned, gpu_name)
    if pin_problems:
        return LayoutFit(problems=tuple(pin_problems))
    # largest footprint first, then by name so that equal profiles sit together
    free.sort(key=lambda p: (-max(s for _, s in p.placements), -p.slice_count, p.name))
    found, best, stuck = _search(fixed, free)
    if found is None:
        return LayoutFit(problems=(_no_fit(best, stuck, profiles, gpu_name),))
    ordered = tuple(sorted(found, key=lambda p: p.start or 0))
    return LayoutFit(placed=ordered)


def _no_fit(
    best: list[PlacedInstance],
    stuck: MigProfile | None,
    profiles: Sequence[MigProfile],
    gpu_name: str,
) -> str:
    what = describe_counts(p.name for p in profiles)
    if stuck is None:
        return f"no placement of {what} fits on {gpu_name}"
    holders = " and ".join(p.describe() for p in best) or "nothing"
    return (
        f"no placement of {what} fits on {gpu_name}: with {holders}, {stuck.name} has no free "
        f"start (it may start at {_starts_text(stuck)}, covering "
        f"{max(s for _, s in stuck.placements)} slice(s))"
    )
