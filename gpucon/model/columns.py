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
from collections.abc import Callable, Mapping
from typing import Generic, TypeVar

from gpucon.model.fleet import Backend, Slot

K = TypeVar("K")
V = TypeVar("V")


class _Newest(Generic[K, V]):
    """The value worked out for the newest key asked about (by identity). The pair is one
    tuple replaced whole, so a reader on another thread sees a matching pair or recomputes."""

    __slots__ = ("_pair",)

    def __init__(self, empty: V) -> None:
        self._pair: tuple[object, V] = (None, empty)

    def get(self, key: K, work_out: Callable[[K], V]) -> V:
        pair = self._pair
        if pair[0] is key:
            return pair[1]
        value = work_out(key)
        self._pair = (key, value)
        return value

    def keep(self, key: K, value: V) -> None:
        self._pair = (key, value)


_SLOT_IDS: _Newest[Mapping[str, Backend], list[str | None]] = _Newest([])
_MODELS: _Newest[Mapping[str, Backend], list[str | None]] = _Newest([])
_SERVING: _Newest[list[str | None], Counter[str | None]] = _Newest(Counter())
_CROWDED: _Newest[Mapping[str, Slot], list[Slot]] = _Newest([])


def slot_ids(backends: Mapping[str, Backend]) -> list[str | None]:
    """Each backend's ``slot_id``, in the mapping's order."""
    return _SLOT_IDS.get(backends, lambda bs: [b.slot_id for b in bs.values()])


def models(backends: Mapping[str, Backend]) -> list[str | None]:
    """Each backend's ``model``, in the mapping's order."""
    return _MODELS.get(backends, lambda bs: [b.model for b in bs.values()])


def backends_per_slot(backends: Mapping[str, Backend]) -> Counter[str | None]:
    """How many backends name each slot id."""
    return _SERVING.get(slot_ids(backends), Counter)


def note_slot_ids(backends: Mapping[str, Backend], column: list[str | None]) -> None:
    """Keep ``column`` as ``backends``' slot ids (the merge read them off the same records,
    in the same order, to note who told of what)."""
    _SLOT_IDS.keep(backends, column)


def crowded(slots: Mapping[str, Slot]) -> list[Slot]:
    """The slots with more than one process (those a co-tenant may share), in order: the
    co-tenant samples and the noisy-neighbour rule look only at these."""
    return _CROWDED.get(slots, lambda ss: [s for s in ss.values() if len(s.processes) > 1])
