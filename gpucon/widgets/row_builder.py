"""Each snapshot's slot-table rows, built only when something reads them.

Pure (no Textual). ``RowBuilder.build(snapshot)`` returns ``Rows``: a mapping from row key to
``RowValues`` whose keys are known at once (one walk of the backends) and whose values are
built on first read, reusing the parts of slots and backends that are the same objects as
last tick. The table reads the rows it shows, a screenful, so a tick costs that many rows
whatever the fleet's size. The default order, the sorts by a name, the ``/`` filter and the
column widths read only each row's names (``Rows.name_of``: host, GPU, slot, profile, backend,
model), kept per slot and backend and worked out again only when those change;
``Rows.names_gen`` counts the builds in which any did, so an unchanged fleet is never
re-sorted, and rows built on another thread (``widgets.tick_prep``) compare with what the
table last showed, not with the last build.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gpucon.model import columns
from gpucon.model.fleet import Backend, Slot
from gpucon.model.snapshot import Snapshot
from gpucon.widgets import fmt
from gpucon.widgets.lazy_rows import RowNames, Rows, same_keys
from gpucon.widgets.safe_text import clean
from gpucon.widgets.slot_rows import (
    NO_BACKEND,
    RowKey,
    RowValues,
    backend_part,
    id_slot_names,
    make_row,
    no_slot_part,
    slot_part,
)
from gpucon.widgets.stale_marks import StaleMarks, stale_marks

__all__ = ["RowBuilder", "RowNames", "Rows", "build_rows", "same_keys"]


def _slot_names(slot: Slot) -> tuple[str, str, str, str]:
    part = slot_part(slot)
    return (part[0], part[1], part[2], part[3])  # type: ignore[return-value]


def _raw_slot_names(slot: Slot) -> tuple[object, ...]:
    """What a slot's names are made of (compared when the slot object changed; the same
    fields, in this order, as ``RowBuilder._names_moved``'s comprehension)."""
    return (
        slot.host,
        slot.vm,
        slot.gpu_index,
        slot.gpu_name,
        slot.kind,
        slot.gi_id,
        slot.profile,
    )


class RowBuilder:
    """Builds the rows of each snapshot, reusing the parts of slots and backends that are the
    same objects as last tick (the hub passes unchanged entities through)."""

    def __init__(self, default_slo_ms: float) -> None:
        self.default_slo_ms = default_slo_ms
        self._slots: dict[str, tuple[Slot, tuple[object, ...]]] = {}
        self._backends: dict[str, tuple[tuple[object, ...], tuple[object, ...]]] = {}
        self._rows: dict[RowKey, tuple[object, object, StaleMarks, RowValues]] = {}
        self._fast: dict[RowKey, tuple[Any, ...]] = {}
        self._marks_key: tuple[object, tuple[tuple[str, str], ...]] = (None, ())
        self._marks: dict[RowKey, StaleMarks] = {}
        # slot id -> (slot, what its names are made of, its names); backend -> (model, text)
        self._slot_names: dict[str, tuple[Slot, tuple[object, ...], tuple[str, str, str, str]]] = {}
        self._models: dict[str, tuple[str | None, str]] = {}
        self._names: dict[RowKey, tuple[object, object, RowNames]] = {}
        # the last walk's slot ids and their name fields, in order (``_names_moved``)
        self._seen_names: tuple[list[str], list[tuple[object, ...]]] = ([], [])
        # the last build's backend names, their slot ids and models, in order (``_keys_of``)
        self._seen_keys: tuple[list[str], list[str | None], list[str | None]] = ([], [], [])
        self.rows_built = 0  # rows worked out (cache misses): tests and benchmarks read it
        self.names_gen = 0  # builds whose names moved (``Rows.names_gen``)
        # the last build's backends, slots and row keys (reused while the structure holds)
        self._structure: (
            tuple[Mapping[str, Backend], Mapping[str, Slot], dict[RowKey, None]] | None
        ) = None

    # -- names -----------------------------------------------------------------------------

    def _names_moved(self, snapshot: Snapshot) -> bool:
        """True if any slot's names changed. While the same slots are there in the same order,
        one comprehension compares each slot's name fields with last tick's (every slot a new
        object, as a live source builds them, costs that one pass); otherwise, or when one
        differs, a walk of the slots that changed."""
        slots = snapshot.slots
        ids = list(slots)
        seen_ids, seen = self._seen_names
        if ids == seen_ids and not [
            1
            for s, raw in zip(slots.values(), seen, strict=True)
            if (s.host, s.vm, s.gpu_index, s.gpu_name, s.kind, s.gi_id, s.profile) != raw
        ]:
            return False
        moved = False
        cache = self._slot_names
        raws: list[tuple[object, ...]] = []
        for sid, slot in slots.items():
            hit = cache.get(sid)
            if hit is not None and hit[0] is slot:
                raws.append(hit[1])
                continue
            raw = _raw_slot_names(slot)
            raws.append(raw)
            if hit is not None and hit[1] == raw:
                cache[sid] = (slot, raw, hit[2])
                continue
            moved = moved or hit is not None
            cache[sid] = (slot, raw, _slot_names(slot))
        self._seen_names = (ids, raws)
        return moved

    def names(self, snapshot: Snapshot, key: RowKey) -> RowNames:
        sid, name = key
        hit = self._slot_names.get(sid)
        slot_names = hit[2] if hit is not None else (*id_slot_names(sid), "")
        model = self._models.get(name) if name else None
        cached = self._names.get(key)
        if cached is not None and cached[0] is slot_names and cached[1] is model:
            return cached[2]
        names = RowNames(clean(sid), *slot_names, clean(name), "" if model is None else model[1])
        self._names[key] = (slot_names, model, names)
        return names

    # -- values ----------------------------------------------------------------------------

    def _slot_part(self, slot: Slot) -> tuple[object, ...]:
        cached = self._slots.get(slot.id)
        if cached is not None and cached[0] is slot:
            return cached[1]
        part = slot_part(slot)
        self._slots[slot.id] = (slot, part)
        return part

    def _backend_part(self, b: Backend, snapshot: Snapshot) -> tuple[object, ...]:
        lat = snapshot.latency.get(b.name)
        slo = snapshot.slo_p95_ms.get(b.name, self.default_slo_ms)
        serving = _serving(snapshot, b)
        inputs = (
            b,
            None if lat is None else lat.p95_ms,
            None if lat is None else lat.req_per_s,
            slo,
            serving,
        )
        cached = self._backends.get(b.name)
        if cached is not None and cached[0] == inputs:  # b compares by identity first
            return cached[1]
        part = backend_part(b, lat, slo, serving)
        self._backends[b.name] = (inputs, part)
        return part

    def _row(
        self,
        key: RowKey,
        slot_part: tuple[object, ...],
        bpart: tuple[object, ...],
        stale: StaleMarks,
    ) -> RowValues:
        cached = self._rows.get(key)
        if (
            cached is not None
            and cached[0] is slot_part
            and cached[1] is bpart
            and cached[2] == stale
        ):
            return cached[3]
        row = make_row(clean(key[0]), slot_part, bpart, stale)
        self._rows[key] = (slot_part, bpart, stale, row)
        self.rows_built += 1
        return row

    def row(self, snapshot: Snapshot, key: RowKey, stale_of: Any) -> RowValues:
        """The row ``key`` of ``snapshot`` (its key must be one of the snapshot's rows)."""
        sid, name = key
        stale: StaleMarks = stale_of(sid, name) if stale_of is not None else ()
        slot = snapshot.slots.get(sid)
        if not name:
            assert slot is not None
            return self._row(key, self._slot_part(slot), NO_BACKEND, stale)
        b = snapshot.backends[name]
        if slot is None:  # a backend on a slot no source knows
            self.rows_built += 1
            return make_row(clean(sid), no_slot_part(sid), self._backend_part(b, snapshot), stale)
        lat = snapshot.latency.get(name)
        p95 = None if lat is None else lat.p95_ms
        rps = None if lat is None else lat.req_per_s
        slo = snapshot.slo_p95_ms.get(name, self.default_slo_ms)
        lv = snapshot.liveness.get(name)
        # the common case: the same slot and backend objects, the same numbers
        hit = self._fast.get(key)
        if (
            hit is not None
            and hit[0] is slot
            and hit[1] is b
            and hit[2:7] == (p95, rps, slo, stale, lv)
        ):
            return hit[7]  # type: ignore[no-any-return]
        row = self._row(key, self._slot_part(slot), self._backend_part(b, snapshot), stale)
        self._fast[key] = (slot, b, p95, rps, slo, stale, lv, row)
        return row

    def build(self, snapshot: Snapshot) -> Rows:
        """One row per (slot, backend); a slot with no backend, or a backend with no known
        slot, gets a row of its own. Values are built when read."""
        # stale marks are worked out only when some value is stale (the rare case)
        staleness = snapshot.staleness
        stale_of = None
        if staleness:
            ages = {n: fmt.age(a) for n, a in staleness.sources.items()}
            # while the same values stay stale at the same shown ages, marks are reused
            marks_key = (staleness.fields, tuple(sorted(ages.items())))
            if self._marks_key[0] is not marks_key[0] or self._marks_key[1] != marks_key[1]:
                self._marks_key, self._marks = marks_key, {}
            marks = self._marks

            def stale_of(sid: str, backend: str) -> StaleMarks:
                found = marks.get((sid, backend))
                if found is None:
                    found = marks[(sid, backend)] = stale_marks(staleness, sid, backend, ages)
                return found

        keys, model_moved = self._keys_of(snapshot)
        if self._names_moved(snapshot) or model_moved:
            self.names_gen += 1
        self._forget(snapshot, keys)
        return Rows(self, snapshot, keys, self.names_gen, stale_of)

    def _keys_of(self, snapshot: Snapshot) -> tuple[dict[RowKey, None], bool]:
        """The row keys, and whether a backend's model changed. The last tick's keys (the
        same dict) while no slot or backend came, went or moved: one pass over the backends."""
        backends, slots = snapshot.backends, snapshot.slots
        models = self._models
        model_moved = False
        last = self._structure
        names = list(backends)
        seen_names, seen_slots, seen_models = self._seen_keys
        slot_ids: list[str | None] | None = None
        models_now: list[str | None] | None = None
        if (
            last is not None
            and names == seen_names
            and (slot_ids := columns.slot_ids(backends)) == seen_slots
            and (models_now := columns.models(backends)) == seen_models
            and (slots is last[1] or slots.keys() == last[1].keys())
        ):
            # the same backends in the same order, on the same slots, serving the same
            # models (every one a new object, as a live source builds them: a column each,
            # compared in C)
            self._structure = (backends, slots, last[2])
            return last[2], False
        self._seen_keys = (
            names,
            columns.slot_ids(backends) if slot_ids is None else slot_ids,
            columns.models(backends) if models_now is None else models_now,
        )
        if last is not None and len(backends) == len(last[0]) and len(slots) == len(last[1]):
            before = last[0].get
            for name, b in backends.items():
                old = before(name)
                if old is b:
                    continue
                if old is None or old.slot_id != b.slot_id:
                    break
                if old.model != b.model:
                    model_moved = True
                    models[name] = (b.model, clean(b.model or ""))
            else:
                if slots.keys() == last[1].keys():
                    self._structure = (backends, slots, last[2])
                    return last[2], model_moved
        # the keys: one walk of the backends (their order does not matter: rows are sorted)
        keys: dict[RowKey, None] = {}
        served: set[str] = set()
        for name, b in backends.items():
            sid = b.slot_id or ""
            keys[(sid, name)] = None
            served.add(sid)
            known = models.get(name)
            if known is None or (known[0] is not b.model and known[0] != b.model):
                model_moved = model_moved or known is not None
                models[name] = (b.model, clean(b.model or ""))
        for sid in slots.keys() - served:
            keys[(sid, "")] = None
        self._structure = (backends, slots, keys)
        return keys, model_moved

    def _forget(self, snapshot: Snapshot, keys: dict[RowKey, None]) -> None:
        """Drop what was kept for slots and backends long gone. A build may run on the hub's
        thread while the UI thread works rows out (``widgets.tick_prep``): each cache is
        copied in one step (``list``) before it is walked, never iterated while it may grow."""
        if len(self._slot_names) > 2 * len(snapshot.slots) + 64:
            slots = snapshot.slots
            self._slot_names = {k: v for k, v in list(self._slot_names.items()) if k in slots}
            self._slots = {k: v for k, v in list(self._slots.items()) if k in slots}
        if len(self._models) > 2 * len(snapshot.backends) + 64:
            live = snapshot.backends
            self._models = {k: v for k, v in list(self._models.items()) if k in live}
            self._backends = {k: v for k, v in list(self._backends.items()) if k in live}
        for cache in (self._rows, self._fast, self._names):
            if len(cache) > 2 * len(keys) + 64:
                for key in [k for k in list(cache) if k not in keys]:
                    cache.pop(key, None)


def _serving(snapshot: Snapshot, b: Backend) -> bool | None:
    """The liveness verdict; without one (no judge ran), what the registry says."""
    lv = snapshot.liveness.get(b.name)
    return b.ready if lv is None else lv.serving


def build_rows(snapshot: Snapshot, default_slo_ms: float) -> dict[RowKey, RowValues]:
    """The rows of one snapshot, built from scratch."""
    return dict(RowBuilder(default_slo_ms).build(snapshot).items())
