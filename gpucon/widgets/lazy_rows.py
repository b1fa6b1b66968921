"""One snapshot's slot-table rows as a mapping whose values are worked out on first read.

Pure (no Textual). ``RowBuilder.build`` (``widgets.row_builder``) makes a ``Rows`` each tick:
its keys are known at once, a row's values are built when something reads them, and its
names (``name_of``) come from caches kept per slot and backend; ``names_gen`` counts the
builds whose names moved. ``same_keys`` tells two ticks'
rows apart by their key set, at once when they share it (no row came or went).
"""

from __future__ import annotations

from collections.abc import Iterator, KeysView, Mapping
from typing import TYPE_CHECKING, Any, NamedTuple

from gpucon.model.snapshot import Snapshot
from gpucon.widgets.slot_rows import RowKey, RowValues

if TYPE_CHECKING:
    from gpucon.widgets.row_builder import RowBuilder


class RowNames(NamedTuple):
    """What a row is called: what the default order, the filter and the widths read."""

    slot_id: str
    host: str
    gpu: str
    slot: str
    profile: str
    backend: str
    model: str


class Rows(Mapping[RowKey, RowValues]):
    """One snapshot's rows: keys now, values on first read."""

    def __init__(
        self,
        builder: RowBuilder,
        snapshot: Snapshot,
        keys: dict[RowKey, None],
        names_gen: int,
        stale_of: Any,
    ) -> None:
        self._builder = builder
        self._snapshot = snapshot
        self.snapshot = snapshot
        self.default_slo_ms = builder.default_slo_ms
        self._keys = keys
        # the key set itself: the same dict from tick to tick while no row came or went
        self.keys_dict = keys
        self._built: dict[RowKey, RowValues] = {}
        self._stale_of = stale_of
        # the builder's count of names moves so far: two ticks' rows with the same count
        # (and the same keys) have the same names, however many ticks lie between them
        self.names_gen = names_gen

    def __getitem__(self, key: RowKey) -> RowValues:
        row = self._built.get(key)
        if row is None:
            if key not in self._keys:
                raise KeyError(key)
            row = self._built[key] = self._builder.row(self._snapshot, key, self._stale_of)
        return row

    def __iter__(self) -> Iterator[RowKey]:
        return iter(self._keys)

    def __len__(self) -> int:
        return len(self._keys)

    def __contains__(self, key: object) -> bool:
        return key in self._keys

    def keys(self) -> KeysView[RowKey]:
        return self._keys.keys()

    @property
    def names_token(self) -> tuple[object, int]:
        """Equal for two rows with the same names (given the same keys): builder and count."""
        return (self._builder, self.names_gen)

    def name_of(self, key: RowKey) -> RowNames:
        return self._builder.names(self._snapshot, key)


def same_keys(rows: Mapping[RowKey, object], other: Mapping[RowKey, object] | None) -> bool:
    """Whether two ticks' rows have the same keys (at once when they share their key dict)."""
    if other is None:
        return False
    if isinstance(rows, Rows) and isinstance(other, Rows) and rows.keys_dict is other.keys_dict:
        return True
    return rows.keys() == other.keys()
