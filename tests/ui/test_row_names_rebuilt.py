"""The row builder's names and keys when every slot and backend is a new object each tick.

A live source builds every entity anew on every read; the builder then compares each one's
name fields (and each backend's slot and model) with last tick's in one pass. Same values:
the names did not move and the row keys are the same dict. One name or model changed among
thousands of new objects: the names moved, and a backend moved to another slot gets its row
there.
"""

from __future__ import annotations

import dataclasses
from typing import Any, TypeVar

from gpucon.hub import with_status
from gpucon.model.snapshot import Snapshot
from gpucon.widgets.row_builder import RowBuilder
from tests.ui.rig import sim_rig

T = TypeVar("T")


def rebuilt(entity: T, **changes: Any) -> T:
    """A new object of the entity's type, built with its constructor from its values."""
    names = getattr(type(entity), "__struct_fields__", None) or [
        f.name
        for f in dataclasses.fields(entity)  # type: ignore[arg-type]
    ]
    values = {name: getattr(entity, name) for name in names} | changes
    return type(entity)(**values)


Changes = dict[str, dict[str, Any]]


def everything_rebuilt(
    snapshot: Snapshot, slots: Changes | None = None, backends: Changes | None = None
) -> Snapshot:
    """``snapshot`` with every slot and backend a new object, with the changes given by slot
    id and by backend name."""
    slots, backends = slots or {}, backends or {}
    return with_status(
        snapshot,
        slots={sid: rebuilt(s, **slots.get(sid, {})) for sid, s in snapshot.slots.items()},
        backends={n: rebuilt(b, **backends.get(n, {})) for n, b in snapshot.backends.items()},
    )


def test_new_objects_with_the_same_names_move_nothing_and_keep_the_keys() -> None:
    snapshot = sim_rig(size=8).step(3)
    builder = RowBuilder(500.0)
    first = builder.build(snapshot)
    for _ in range(3):
        again = builder.build(everything_rebuilt(snapshot))
        assert again.names_gen == first.names_gen
        assert again.keys_dict is first.keys_dict


def test_one_changed_name_or_model_among_new_objects_moves_the_names() -> None:
    snapshot = sim_rig(size=8).step(3)
    builder = RowBuilder(500.0)
    gen = builder.build(snapshot).names_gen
    sid = sorted(snapshot.slots)[3]
    renamed = everything_rebuilt(snapshot, {sid: {"profile": "7g.80gb-renamed"}})
    rows = builder.build(renamed)
    assert rows.names_gen == gen + 1
    key = next(k for k in rows if k[0] == sid)
    assert rows.name_of(key).profile == "7g.80gb-renamed"
    # the same again (new objects once more): nothing moved since
    assert builder.build(everything_rebuilt(renamed)).names_gen == gen + 1

    name = sorted(snapshot.backends)[0]
    remodelled = everything_rebuilt(renamed, backends={name: {"model": "other-model"}})
    rows = builder.build(remodelled)
    assert rows.names_gen == gen + 2
    key = next(k for k in rows if k[1] == name)
    assert rows.name_of(key).model == "other-model"


def test_a_backend_moved_to_another_slot_among_new_objects_gets_its_row_there() -> None:
    snapshot = sim_rig(size=8).step(3)
    builder = RowBuilder(500.0)
    before = builder.build(snapshot)
    name, b = sorted(snapshot.backends.items())[0]
    elsewhere = next(sid for sid in sorted(snapshot.slots) if sid != b.slot_id)
    rows = builder.build(everything_rebuilt(snapshot, backends={name: {"slot_id": elsewhere}}))
    assert (elsewhere, name) in rows and (b.slot_id, name) not in rows
    assert rows.keys_dict is not before.keys_dict
