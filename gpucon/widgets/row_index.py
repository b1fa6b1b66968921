"""The rows' names worked out once for a set of names: what the filter and the name sorts read.

Pure (no Textual). ``RowOrder`` keeps one ``NameIndex`` while no row comes or goes and no
row's names move (``Rows.names_gen``), so a key that re-filters or re-sorts 13,700 rows by a
name does not read 13,700 rows' names again: the search texts, the default order (less its
problem rows, which are few and move with the alerts) and each name column's order are
worked out at most once per set of names, and typing on in the filter box searches only the
rows the shorter text matched.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TypeAlias

from gpucon.widgets.lazy_rows import RowNames
from gpucon.widgets.slot_rows import RowKey, RowValues

# what a column sorts by (None, a value no source reports, sorts last in both directions)
SortValue: TypeAlias = str | int | float | tuple[float, float]

DEFAULT_SORT = "default"


def search_text(row: RowValues | RowNames) -> str:
    """What ``/`` filters on: host, slot, backend and model, lower-cased."""
    return f"{row.slot_id}\n{row.host}\n{row.slot}\n{row.backend}\n{row.model}".lower()


def ordered(
    keys: Sequence[RowKey],
    values: Mapping[RowKey, SortValue | None] | Callable[[RowKey], SortValue | None],
    reverse: bool,
) -> list[RowKey]:
    """``keys`` by value (``reverse``: largest first), ties in row-key order in both
    directions, rows without a value last. ``keys`` must come in row-key order."""
    if not isinstance(values, Mapping):
        value_of = values
        values = {k: value_of(k) for k in keys}
    known = [k for k in keys if values[k] is not None]
    unknown = [k for k in keys if values[k] is None] if len(known) < len(keys) else []
    # stable in both directions (``reverse`` keeps ties in their order): row-key order
    known.sort(key=values.__getitem__, reverse=reverse)  # type: ignore[arg-type]
    return known + unknown


def still_ordered(
    keys: list[RowKey], value_of: Mapping[RowKey, SortValue | None], reverse: bool
) -> bool:
    """Whether ``keys`` is the order ``ordered`` gives for these values: no value crossed a
    neighbour's, so a tick whose values moved within their places re-sorts nothing."""
    last_value: SortValue | None = None
    last_key: RowKey | None = None
    in_unknown = False
    for k in keys:
        v = value_of.get(k)
        if v is None:
            if in_unknown and last_key is not None and not last_key < k:
                return False
            in_unknown, last_key = True, k
            continue
        if in_unknown:
            return False
        if last_key is not None and last_value is not None:
            if v == last_value:
                if not last_key < k:
                    return False
            elif (v > last_value) if reverse else (v < last_value):  # type: ignore[operator]
                return False
        last_value, last_key = v, k
    return True


class NameIndex:
    """One set of rows' names: search texts, the default order's base, name columns' orders."""

    def __init__(self, keys: Iterable[RowKey], names_of: Callable[[RowKey], RowNames]) -> None:
        self.names: dict[RowKey, RowNames] = {k: names_of(k) for k in keys}
        self._texts: dict[RowKey, str] | None = None
        self._by_key: list[RowKey] | None = None
        self._orders: dict[tuple[str, bool], list[RowKey]] = {}
        # the last filter text and the rows it matched (typing on narrows these)
        self._matched: tuple[str, set[RowKey]] = ("", set())

    @property
    def by_key(self) -> list[RowKey]:
        """Every row in row-key order (what ties and rows without a value fall back to)."""
        if self._by_key is None:
            self._by_key = sorted(self.names)
        return self._by_key

    def matching(self, needle: str) -> set[RowKey]:
        """The rows whose search text holds ``needle`` (lower-cased, not empty)."""
        if self._texts is None:
            self._texts = {k: search_text(n) for k, n in self.names.items()}
        texts = self._texts
        last, matched = self._matched
        if needle == last:
            return matched
        # a longer text that holds the last one matches only rows the last one matched
        pool: Iterable[RowKey] = matched if last and last in needle else texts
        found = {k for k in pool if needle in texts[k]}
        self._matched = (needle, found)
        return found

    def default_base(self) -> list[RowKey]:
        """The default order of rows with no problem: host, GPU, slot id, backend."""
        order = self._orders.get((DEFAULT_SORT, False))
        if order is None:
            names = self.names
            order = sorted(names, key=lambda k: (names[k].host, names[k].gpu, k[0], k[1]))
            self._orders[(DEFAULT_SORT, False)] = order
        return order

    def default_order(self, problems: Mapping[RowKey, int]) -> list[RowKey]:
        """Rows with a problem first (the worst first), then the rest in the base order."""
        names = self.names
        first = [k for k in problems if k in names]
        if not first:
            return self.default_base()
        first.sort(key=lambda k: (-problems[k], names[k].host, names[k].gpu, k[0], k[1]))
        held = set(first)
        return first + [k for k in self.default_base() if k not in held]

    def by_name(
        self, column: str, value: Callable[[RowNames], SortValue | None], reverse: bool
    ) -> list[RowKey]:
        """The rows sorted by a name column (worked out once per column and direction)."""
        order = self._orders.get((column, reverse))
        if order is None:
            names = self.names
            order = ordered(self.by_key, lambda k: value(names[k]), reverse)
            self._orders[(column, reverse)] = order
        return order
