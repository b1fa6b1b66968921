"""What the fleet table says when it has no row: why, so an unknown fleet never looks empty.

A console started while Redis was down showed a bare table and ``0 backends``: the registry
had never been read, yet nothing told it from a fleet with no backends. The table's first
line says which sources have never read (the registry's, ``redis``, named as such), or that
the filter matches nothing, or that the registry lost every backend it listed before (a Redis
restarted empty), or that every source read and reported no slot or backend.
"""

from __future__ import annotations

from gpucon.model.fleet import Health
from gpucon.model.queue_stall import QUEUE_SOURCE
from gpucon.model.snapshot import Snapshot


def empty_table_note(snapshot: Snapshot | None, filtered: bool) -> str:
    """The line an empty table shows (``filtered``: rows exist, the filter hid them all)."""
    if filtered:
        return "no row matches the filter (Esc clears it)"
    if snapshot is None:
        return "waiting for the first snapshot…"
    unread = [s for name, s in sorted(snapshot.sources.items()) if s.last_ok_at is None]
    listed = snapshot.registry_listed
    if not unread and listed is not None and not snapshot.backends:
        return (
            f"the registry lost every backend: it listed {listed.count}, now none "
            "(Redis restarted empty?); no source names a slot"
        )
    if not unread:
        return "no slot or backend reported: every source read, none named one"
    parts = []
    for s in unread:
        what = f"{s.name} (the registry)" if s.name == QUEUE_SOURCE else s.name
        how = "never read (down)" if s.health is Health.DOWN else "not read yet"
        parts.append(f"{what} {how}")
    return "fleet unknown, not empty: " + "; ".join(parts)
