"""A GPU's MIG GPU-instance profile table, and layout checks against it.

NVML answers ``nvmlDeviceGetGpuInstanceProfileInfo`` and
``nvmlDeviceGetGpuInstancePossiblePlacements`` even with MIG off (read on the H200 here); the
NVML source turns those answers into a ``ProfileTable``. A placement is where an instance may
start and how many memory slices it then covers (a 3g profile covers 4 of the 8: ``{0,4}:4``).
A re-slice validates a requested layout against this table before anything changes
(``gpucon.model.mig_placement`` finds the placements). Pure: no IO.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Sequence

import msgspec

MIB_PER_GIB = 1024


class MigProfile(msgspec.Struct, frozen=True, gc=False):
    """One GPU-instance profile as NVML describes it."""

    name: str  # "3g.40gb", "1g.18gb+me" (NVML's name without its "MIG " prefix)
    profile_index: int  # the NVML_GPU_INSTANCE_PROFILE_* constant it was asked with
    profile_id: int  # the id NVML gives the profile (nvmlGpuInstanceProfileInfo_t.id)
    slice_count: int
    instance_count: int  # how many instances of this profile fit on an empty GPU
    sm_count: int
    memory_mib: int
    copy_engines: int = 0
    decoders: int = 0
    encoders: int = 0
    jpeg: int = 0
    ofa: int = 0
    # (start, size) in memory slices, as NVML's possible placements list them; empty: not read
    placements: tuple[tuple[int, int], ...] = ()

    @property
    def starts(self) -> tuple[int, ...]:
        return tuple(start for start, _ in self.placements)

    def size_at(self, start: int) -> int | None:
        """Memory slices an instance starting at ``start`` covers (None: it cannot start there)."""
        return next((size for s, size in self.placements if s == start), None)


def profile_name(slice_count: int, memory_mib: float) -> str:
    """The conventional name for a profile NVML gave no name for: ``3g.40gb``."""
    return f"{slice_count}g.{math.ceil(memory_mib / MIB_PER_GIB)}gb"


def strip_mig_prefix(name: str) -> str:
    return name[4:] if name.startswith("MIG ") else name


class ProfileTable(msgspec.Struct, frozen=True, gc=False):
    """The profiles one GPU model offers, in NVML's order."""

    profiles: tuple[MigProfile, ...]

    @property
    def total_slices(self) -> int:
        return max((p.slice_count for p in self.profiles), default=0)

    @property
    def memory_slices(self) -> int:
        """The placement space: 8 on every MIG GPU so far (0 when no placements are known)."""
        return max((s + n for p in self.profiles for s, n in p.placements), default=0)

    @property
    def has_placements(self) -> bool:
        return bool(self.profiles) and all(p.placements for p in self.profiles)

    def by_name(self, name: str) -> MigProfile | None:
        wanted = strip_mig_prefix(name.strip())
        return next((p for p in self.profiles if p.name == wanted), None)

    def names(self) -> tuple[str, ...]:
        return tuple(p.name for p in self.profiles)

    def match(self, slice_count: int, memory_mib: float) -> MigProfile | None:
        """The plain profile (no ``+me``/``+gfx`` suffix first) with this size and memory.

        A MIG device reports its memory a little under its profile's; the closest profile with
        the same slice count and no more memory than 1 GiB off wins.
        """
        close = [
            p
            for p in self.profiles
            if p.slice_count == slice_count and abs(p.memory_mib - memory_mib) <= MIB_PER_GIB
        ]
        close.sort(key=lambda p: ("+" in p.name, abs(p.memory_mib - memory_mib), p.name))
        return close[0] if close else None

    def validate_layout(self, layout: Sequence[str]) -> list[str]:
        """Problems with a layout (list of profile names) on an empty GPU; empty when it fits.

        Checks names, per-profile instance counts and the total compute slices, then, when the
        table knows its placements, that every instance has a start of its own
        (``gpucon.model.mig_placement.fit_layout``, the check a re-slice makes): 2 × 3g.40gb +
        1 × 1g.10gb fits 7 compute slices but not an A100's 8 memory slices, two 3g covering all.
        """
        problems: list[str] = []
        if not layout:
            return ["layout is empty: name at least one profile"]
        known: list[MigProfile] = []
        for position, name in enumerate(layout):
            profile = self.by_name(name)
            if profile is None:
                problems.append(
                    f"layout[{position}]: unknown profile {name!r}; "
                    f"this GPU offers {', '.join(self.names()) or 'none'}"
                )
            else:
                known.append(profile)
        for name, count in Counter(p.name for p in known).items():
            profile = self.by_name(name)
            if profile is not None and count > profile.instance_count:
                problems.append(f"layout: {count}× {name} but at most {profile.instance_count} fit")
        used = sum(p.slice_count for p in known)
        if self.total_slices and used > self.total_slices:
            problems.append(
                f"layout: {used} compute slices requested but the GPU has {self.total_slices}"
            )
        if not problems and self.has_placements:
            # imported here: mig_placement reads this module's records
            from gpucon.model.mig_layout import LayoutItem
            from gpucon.model.mig_placement import fit_layout

            fit = fit_layout(self, [LayoutItem(p.name) for p in known], "this GPU")
            problems.extend(f"layout: {problem}" for problem in fit.problems)
        return problems


def table_from(profiles: Iterable[MigProfile]) -> ProfileTable | None:
    """A table of the given profiles, or None when there are none (no MIG on this GPU)."""
    found = tuple(profiles)
    return ProfileTable(found) if found else None
