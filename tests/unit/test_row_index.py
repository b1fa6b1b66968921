"""The rows' names index: orders and filters it keeps give what working them out afresh gives.

``ordered`` sorts by value with ties in row-key order and rows without a value last, in both
directions; ``still_ordered`` says whether a list is that order for new values (a tick whose
values stayed in their places re-sorts nothing); the filter narrows as the text grows and
matches what a fresh search matches.
"""

from __future__ import annotations

import random

from gpucon.widgets.lazy_rows import RowNames
from gpucon.widgets.row_index import NameIndex, ordered, search_text, still_ordered
from gpucon.widgets.slot_rows import RowKey


def _reference(
    keys: list[RowKey], values: dict[RowKey, float | None], reverse: bool
) -> list[RowKey]:
    """The order spelled out: known values by value (ties by key), then unknown by key."""
    known = sorted((k for k in keys if values[k] is not None), key=lambda k: k)
    known.sort(key=lambda k: values[k], reverse=reverse)  # type: ignore[arg-type,return-value]
    return known + sorted(k for k in keys if values[k] is None)


def test_ordered_and_still_ordered_agree_with_the_order_spelled_out() -> None:
    rng = random.Random(13)
    keys = sorted((f"h{i % 7}/gpu{i}", f"b{i}" if i % 3 else "") for i in range(300))
    for _ in range(200):
        # few distinct values: many ties; some rows with none
        values = {k: (None if rng.random() < 0.2 else float(rng.randint(0, 9))) for k in keys}
        for reverse in (False, True):
            order = ordered(keys, values, reverse)
            assert order == _reference(keys, values, reverse)
            assert order == ordered(keys, values.__getitem__, reverse)  # a function of the key
            assert still_ordered(order, values, reverse)
            # one value moves: the order still holds exactly when the fresh order is the same
            moved = dict(values)
            k = rng.choice(keys)
            moved[k] = None if rng.random() < 0.2 else float(rng.randint(0, 9))
            assert still_ordered(order, moved, reverse) == (
                order == _reference(keys, moved, reverse)
            )


def _names(key: RowKey) -> RowNames:
    slot_id, backend = key
    host = slot_id.split("/")[0]
    return RowNames(slot_id, host, slot_id.split("/")[1], "", "1g.18gb", backend, f"m-{backend}")


def test_the_filter_narrows_as_it_is_typed_and_matches_what_a_fresh_search_finds() -> None:
    keys = [(f"node-{i % 11}/gpu{i % 8}", f"llama-{i}") for i in range(500)]
    index = NameIndex(keys, _names)
    for text in ("n", "no", "node-1", "node-10", "node-1", "", "llama-4", "llama-49", "zz", "z"):
        if not text:
            continue
        fresh = {k for k in keys if text in search_text(_names(k))}
        assert index.matching(text) == fresh, text


def test_the_default_order_puts_problem_rows_first_worst_first_then_host_gpu_slot() -> None:
    keys = [(f"node-{i % 5}/gpu{i % 3}", f"b{i}") for i in range(60)]
    index = NameIndex(keys, _names)
    problems = {keys[7]: 2, keys[40]: 3, keys[3]: 2}
    order = index.default_order(problems)
    assert order[:3] == [keys[40], *sorted([keys[7], keys[3]], key=lambda k: (k[0], k[1]))]
    rest = order[3:]
    assert rest == sorted(set(keys) - set(problems), key=lambda k: (k[0].split("/")[0], k))
    assert index.default_order({}) == index.default_base()
