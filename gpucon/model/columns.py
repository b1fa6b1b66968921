"""The backends' slot ids and models as columns (a list in the backends' order), and the slots
with more than one process, worked out once per mapping.

Several readers of one snapshot need the same column of its backends: the hub's SLOs and the
co-tenant samples, the table's row keys and its slot count. With every backend a new record
each read (a live source), each column is a pass over thousands of records, touched again
each time. The newest mapping's columns are kept (by identity: a snapshot's mappings are
never changed), so each is read once a tick. A column is shared: callers must not change it.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping

from gpucon.model.fleet import Backend, Slot

# (backends mapping, its column) of the newest mapping asked about; one tuple replaced whole,
# so a reader on another thread sees a matching pair or recomputes
_SLOT_IDS: tuple[object, list[str | None]] = (None, [])
_MODELS: tuple[object, list[str | None]] = (None, [])
_SERVING: tuple[object, Counter[str | None]] = (None, Counter())
_CROWDED: tuple[object, list[Slot]] = (None, [])


def slot_ids(backends: Mapping[str, Backend]) -> list[str | None]:
    """Each backend's ``slot_id``, in the mapping's order."""
    global _SLOT_IDS
    memo = _SLOT_IDS
    if memo[0] is backends:
        return memo[1]
    column = [b.slot_id for b in backends.values()]
    _SLOT_IDS = (backends, column)
    return column


def models(backends: Mapping[str, Backend]) -> list[str | None]:
    """Each backend's ``model``, in the mapping's order."""
    global _MODELS
    memo = _MODELS
    if memo[0] is backends:
        return memo[1]
    column = [b.model for b in backends.values()]
    _MODELS = (backends, column)
    return column


def backends_per_slot(backends: Mapping[str, Backend]) -> Counter[str | None]:
    """How many backends name each slot id."""
    global _SERVING
    column = slot_ids(backends)
    memo = _SERVING
    if memo[0] is column:
        return memo[1]
    counts = Counter(column)
    _SERVING = (column, counts)
    return counts


def note_slot_ids(backends: Mapping[str, Backend], column: list[str | None]) -> None:
    """Keep ``column`` as ``backends``' slot ids (the merge read them off the same records,
    in the same order, to note who told of what)."""
    global _SLOT_IDS
    _SLOT_IDS = (backends, column)


def crowded(slots: Mapping[str, Slot]) -> list[Slot]:
    """The slots with more than one process (those a co-tenant may share), in order: the
    co-tenant samples and the noisy-neighbour rule look only at these."""
    global _CROWDED
    memo = _CROWDED
    if memo[0] is slots:
        return memo[1]
    found = [s for s in slots.values() if len(s.processes) > 1]
    _CROWDED = (slots, found)
    return found
