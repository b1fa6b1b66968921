"""What this console remembers of the scheduler registry: how many backends it last listed.

A Redis without persistence that restarts (or a ``FLUSHALL``) comes back empty under a running
fleet: the registry then lists no backend, and a console that only looks at the newest read
shows an empty fleet as if it had never had one. The hub keeps the last count the registry
gave while it listed any backend, and when (``RegistryListed``); the ``no_backends`` alert
says the registry lost them all (``it listed 3 until 14s ago``) rather than an empty table
with nothing to explain it. A read that failed says nothing new: the registry's last word
stands while its source is out.

The same restart forgets a backend whose server is gone (nothing registers it again): its
``not_ready`` CRIT ended with it, as if it had recovered. The hub keeps the backends that left
the registry while not serving (``Departed``, ``track_departed``) for a while, and
``left_registry`` names them.
"""

from __future__ import annotations

from collections.abc import Mapping

import msgspec

from gpucon.model.fleet import Backend, BackendState
from gpucon.model.liveness import BackendLiveness


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


# how long a backend that left the registry while not serving is still named
DEPARTED_KEEP_S = 900.0


class Departed(msgspec.Struct, frozen=True, gc=False):
    """A backend that left the registry while it was not serving: when, and what said so."""

    name: str
    at: float
    because: str


def departures(
    before: Mapping[str, Backend],
    liveness: Mapping[str, BackendLiveness],
    backends: Mapping[str, Backend],
) -> dict[str, str]:
    """The backends listed ``before`` (last tick, with its verdicts ``liveness``) and not in
    ``backends`` that were not serving then: name -> what said so (the names compared as key
    views, in C; nothing while the mapping is the same)."""
    if before is backends:
        return {}
    gone = before.keys() - backends.keys()  # in C: most ticks, nothing
    if not gone:
        return {}
    out: dict[str, str] = {}
    for name in sorted(gone):
        lv = liveness.get(name)
        if lv is not None and lv.serving is False:
            out[name] = lv.because or "not ready"
        elif before[name].state is BackendState.DOWN:
            out[name] = "registry state down"
    return out


def track_departed(
    previous: tuple[Departed, ...],
    left: Mapping[str, str],
    backends: Mapping[str, Backend],
    read_fresh: bool,
    now: float,
) -> tuple[Departed, ...]:
    """The backends that left the registry while not serving, newest last: ``left``
    (``departures``: name -> why) added on a fresh read; each dropped when listed again or
    ``DEPARTED_KEEP_S`` after. The tuple is ``previous`` itself while nothing changes."""
    kept = previous
    if previous:
        kept = tuple(
            d for d in previous if d.name not in backends and now - d.at <= DEPARTED_KEEP_S
        )
        if len(kept) == len(previous):
            kept = previous
    if read_fresh and left:
        known = {d.name for d in kept}
        new = tuple(Departed(n, now, why) for n, why in left.items() if n not in known)
        if new:
            return kept + new
    return kept
