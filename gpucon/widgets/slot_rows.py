"""The slot table's rows as plain values: one row per (slot, backend), and its columns.

This module is pure (no Textual): it says what a row holds (``RowValues``), how a slot's and a
backend's columns are worked out, and which columns there are and how they lay out;
``row_builder`` turns each Snapshot into rows, ``row_order`` sorts and filters them.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import NamedTuple, Protocol

import msgspec
from msgspec.structs import replace
from rich.cells import cell_len

from gpucon.model.fleet import Backend, LatencyStats, Slot, SlotKind
from gpucon.model.ids import parse_slot_id
from gpucon.widgets import p95_cell
from gpucon.widgets.safe_text import clean
from gpucon.widgets.stale_marks import StaleMarks

RowKey = tuple[str, str]  # (slot id, backend name or "")


class _Named(Protocol):
    """What the width of the name columns reads of a row (its values, or only its names)."""

    @property
    def backend(self) -> str: ...
    @property
    def slot(self) -> str: ...
    @property
    def host(self) -> str: ...
    @property
    def gpu(self) -> str: ...


HOT_PCT = 90.0
LOW_FREE_MIB = 1536.0


class RowValues(NamedTuple):
    slot_id: str
    host: str
    gpu: str
    slot: str
    profile: str
    activity: float | None
    metric: str
    mem_used: float | None
    mem_total: float | None
    backend: str
    model: str
    weight: float | None
    state: str
    inflight: int | None
    p95: float | None
    slo: float | None
    rps: float | None
    # is the backend serving (model.liveness): False not ready, None nothing vouches for it
    ready: bool | None
    # the row's stale values: ("activity" | "mem" | "weight" | "state" | "inflight" | "ready"
    # | "p95" | "rps", age text); empty when every value is fresh
    stale: StaleMarks

    def stale_age(self, value: str) -> str | None:
        """The age text of a stale value of this row, or None when it is fresh."""
        for name, age in self.stale:
            if name == value:
                return age
        return None


class Column(msgspec.Struct, frozen=True, gc=False):
    """One slot-table column: title, width, tooltip, alignment and drop priority."""

    key: str
    title: str
    width: int  # minimum width in cells
    tooltip: str
    right: bool = False
    flex: int = 0  # extra cells it may take, at most
    priority: int = 5  # columns with the lowest priority are dropped first when narrow
    # what its cells show, when not its key: SLOT shows "0/gi1" while GPU is dropped
    cell_key: str = ""


COLUMNS: tuple[Column, ...] = (
    Column("host", "HOST", 8, "host name", flex=12, priority=9),
    Column("gpu", "GPU", 11, "GPU index and model", flex=6, priority=3),
    Column("slot", "SLOT", 8, "MIG instance (giN), whole GPU, or VM name", flex=10, priority=8),
    Column("profile", "PROFILE", 9, "MIG profile, or the GPU's model", priority=6),
    Column("activity", "ACT%", 10, "activity: the metric is named in the detail", priority=10),
    Column("trend", "TREND", 10, "activity over the last samples", priority=2),
    Column("mem", "MEM GiB", 11, "memory used / total", right=True, priority=7),
    Column("backend", "BACKEND", 14, "inference server on this slot", flex=14, priority=9),
    Column("weight", "WT", 4, "scheduler weight", right=True, priority=4),
    Column(
        "state",
        "STATE",
        9,
        "registry state; NOT READY: its readiness signals say so; drained ✗: drained and "
        "not ready; active?: none vouches",
        priority=8,
    ),
    Column("inflight", "INFL", 6, "requests in flight", right=True, priority=5),
    # 13 cells at least ("1840/2500·45s", "7590/14k·30s"); 14 when the names left room
    Column(
        "p95",
        "P95/SLO ms",
        p95_cell.MIN_WIDTH,
        "p95 latency against the SLO, ms",
        right=True,
        flex=p95_cell.WIDTH - p95_cell.MIN_WIDTH,
        priority=9,
    ),
    # the title names the rate's window when the snapshot says it ("REQ/S 1m")
    Column("rps", "REQ/S", 9, "requests per second over the window named", right=True, priority=6),
)
COLUMN_KEYS = tuple(c.key for c in COLUMNS)
COLUMN_BY_KEY = {c.key: c for c in COLUMNS}


# the name columns, which take spare width up to their longest value, most useful first
NAME_COLUMNS = ("backend", "slot", "host", "gpu")
# the columns that take spare width: names an operator must read, then P95/SLO, whose wider
# cell writes a stale p95's ms in full ("7590/14000·30s", not "7590/14k·30s")
FLEX_ORDER = (*NAME_COLUMNS, "p95")


def layout(
    width: int, natural: Mapping[str, int] | None = None, columns: Iterable[Column] = COLUMNS
) -> list[tuple[Column, int, int]]:
    """Columns that fit ``width`` as (column, x, cell width); the narrow ones dropped first.

    Spare width goes to the name columns (``NAME_COLUMNS``), each up to its ``natural`` width
    (the longest value it holds) and at most ``flex`` more cells than its minimum, then to
    P95/SLO (its ``flex``).
    """
    shown = list(columns)
    while shown and sum(c.width for c in shown) + len(shown) - 1 > width:
        shown.remove(min(shown, key=lambda c: c.priority))
    spare = max(0, width - (sum(c.width for c in shown) + len(shown) - 1))
    extra: dict[str, int] = {}
    by_key = {c.key: c for c in shown}
    for key in FLEX_ORDER:
        c = by_key.get(key)
        if c is None:
            continue
        longest = None if natural is None else natural.get(key)
        wanted = c.flex if longest is None else max(0, longest - c.width)
        extra[key] = min(c.flex, wanted, spare)
        spare -= extra[key]
    if "gpu" not in by_key and "slot" in by_key:
        # without its GPU column "gi1" could be any GPU's: the slot names its GPU's index
        slot = by_key["slot"]
        shown[shown.index(slot)] = replace(slot, title="GPU/SLOT", cell_key="gpu_slot")
    placed: list[tuple[Column, int, int]] = []
    x = 0
    for c in shown:
        w = c.width + extra.get(c.key, 0)
        placed.append((c, x, w))
        x += w + 1
    return placed


def natural_widths(rows: Iterable[_Named]) -> dict[str, int]:
    """The longest value of each name column, in terminal cells."""
    widths = dict.fromkeys(NAME_COLUMNS, 0)
    for r in rows:
        for key, value in (
            ("backend", r.backend),
            ("slot", r.slot),
            ("host", r.host),
            ("gpu", r.gpu),
        ):
            n = len(value) if value.isascii() else cell_len(value)
            if n > widths[key]:
                widths[key] = n
    return widths


def _slot_label(slot: Slot) -> str:
    if slot.kind is SlotKind.VM:
        # the id, not the VM's name: a guest with several GPUs has a row for each (NAME/1)
        return clean(slot.id.removeprefix("vm:"))
    if slot.kind is SlotKind.MIG:
        return f"gi{slot.gi_id}" if slot.gi_id is not None else clean(slot.id)
    return "whole"


def short_gpu_name(name: str | None) -> str:
    """``NVIDIA GeForce RTX 4090`` -> ``RTX 4090``: the part that tells cards apart."""
    return clean(name or "").removeprefix("NVIDIA ").removeprefix("GeForce ")


def _gpu_label(slot: Slot) -> str:
    index = "?" if slot.gpu_index is None else str(slot.gpu_index)
    return f"{index} {short_gpu_name(slot.gpu_name)}".strip()


NO_SLOT: tuple[object, ...] = ("", "", "", "", None, "", None, None)


def id_slot_names(slot_id: str) -> tuple[str, str, str]:
    """(host, GPU, SLOT) of a slot no source describes, read from its id when it parses
    (``lab/gpu0/gi1``: ``lab``, ``0``, ``gi1``), as a described slot's row would show them;
    else no host or GPU and the id itself as SLOT."""
    try:
        parsed = parse_slot_id(slot_id)
    except ValueError:
        return ("", "", clean(slot_id))
    if parsed.host is None or parsed.gpu_index is None:
        return ("", "", clean(slot_id))  # a VM: its id names no host
    label = "whole" if parsed.gi_id is None else f"gi{parsed.gi_id}"
    return (clean(parsed.host), str(parsed.gpu_index), label)


def no_slot_part(slot_id: str) -> tuple[object, ...]:
    """The slot columns of a backend whose slot no source describes (names from its id)."""
    return (*id_slot_names(slot_id), *NO_SLOT[3:])


NO_BACKEND: tuple[object, ...] = ("", "", None, "", None, None, None, None, None)


def slot_part(slot: Slot) -> tuple[object, ...]:
    """The slot's columns (all but the id), computed once for all its backends."""
    host = slot.host or (slot.vm.host if slot.vm else None) or ""
    return (
        clean(host),
        _gpu_label(slot),
        _slot_label(slot),
        clean(slot.profile or "") if slot.kind is SlotKind.MIG else short_gpu_name(slot.profile),
        slot.activity_pct,
        clean(slot.activity_metric or ""),
        slot.mem_used_mib,
        slot.mem_total_mib,
    )


def backend_part(
    b: Backend, lat: LatencyStats | None, slo: float | None, serving: bool | None
) -> tuple[object, ...]:
    return (
        clean(b.name),
        clean(b.model or ""),
        b.weight,
        b.state.value,
        b.inflight,
        None if lat is None else lat.p95_ms,
        slo,
        None if lat is None else lat.req_per_s,
        serving,
    )


def make_row(
    slot_id: str,
    slot_part: tuple[object, ...],
    backend_part: tuple[object, ...],
    stale: StaleMarks,
) -> RowValues:
    return RowValues._make((slot_id, *slot_part, *backend_part, stale))
