"""What this console remembers of the scheduler registry: how many backends it last listed.

A Redis without persistence that restarts (or a ``FLUSHALL``) comes back empty under a running
fleet: the registry then lists no backend, and a console that only looks at the newest read
shows an empty fleet as if it had never had one. The hub keeps the last count the registry
gave while it listed any backend, and when (``RegistryListed``); the ``no_backends`` alert
says the registry lost them all (``it listed 3 until 14s ago``) rather than an empty table
with nothing to explain it. A read that failed says nothing new: the registry's last word
stands while its source is out.
"""

from __future__ import annotations

from collections.abc import Mapping

import msgspec

from gpucon.model.fleet import Backend


class RegistryListed(msgspec.Struct, frozen=True, gc=False):
    """The registry's last non-empty listing this console saw: how many backends, and when."""

    count: int
    at: float


def track_registry_listed(
    previous: RegistryListed | None,
    backends: Mapping[str, Backend],
    read_fresh: bool,
    now: float,
) -> RegistryListed | None:
    """The registry's last non-empty listing as of this tick: this one when it lists any
    backend and its source read fresh, else the one before (an empty registry keeps it, so
    that it can say how many it had)."""
    if read_fresh and backends:
        return RegistryListed(len(backends), now)
    return previous
