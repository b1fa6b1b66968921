"""Which values of a slot-table row are stale, and the age each shows: the row's stale marks.

Pure (no Textual): the Snapshot's Staleness says, per entity and field, which stale source a
value came from; a row (slot + backend) maps its columns' values to those fields.
"""

from __future__ import annotations

from collections.abc import Mapping

from gpucon.model.staleness import Staleness
from gpucon.widgets import fmt

# (value name, its age as shown) of each stale value of a row; () when all are fresh
StaleMarks = tuple[tuple[str, str], ...]

# (value name in a row, field of the entity) per entity kind
_SLOT_VALUES = (("activity", "activity_pct"), ("mem", "mem_used_mib"), ("mem", "mem_total_mib"))
_BACKEND_VALUES = (
    ("weight", "weight"),
    ("state", "state"),
    ("inflight", "inflight"),
    ("ready", "ready"),
)
_LATENCY_VALUES = (("p95", "p95_ms"), ("rps", "req_per_s"))


def stale_marks(
    staleness: Staleness, slot_id: str, backend: str, ages: Mapping[str, str] | None = None
) -> StaleMarks:
    """The stale values of the row of ``slot_id`` and ``backend`` ("" for none), with ages
    (``ages``: each stale source's age as shown, when the caller has worked it out already)."""
    fields = staleness.fields
    by_slot = fields.get(f"slot:{slot_id}")
    by_backend = fields.get(f"backend:{backend}") if backend else None
    by_latency = fields.get(f"latency:{backend}") if backend else None
    if not (by_slot or by_backend or by_latency):
        return ()
    if ages is None:
        ages = {name: fmt.age(age) for name, age in staleness.sources.items()}
    marks: list[tuple[str, str]] = []
    for by_field, values in (
        (by_slot, _SLOT_VALUES),
        (by_backend, _BACKEND_VALUES),
        (by_latency, _LATENCY_VALUES),
    ):
        if not by_field:
            continue
        for name, field_name in values:
            source = by_field.get(field_name)
            if source is not None and not any(n == name for n, _ in marks):
                marks.append((name, ages.get(source, "?")))
    return tuple(marks)
