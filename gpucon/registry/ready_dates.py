"""When each backend's readiness verdict last changed, for the ``gpucon:ready`` document.

A health checker knows when a verdict changed (the first check that gave the new value) far
better than a console, which sees only the last check's time. It dates a change only when its
check before was recent (``DATED_GAP_S``): the change fell between the two checks, so the new
check's time is at most that far off. A verdict it has only ever seen the same (just started,
or after a gap) stays undated; consoles then say "for at least" as before. A checker that
restarts starts from the document already in Redis, so a restart keeps the dates.
"""

from __future__ import annotations

from collections.abc import Mapping

from gpucon.registry.parse import READY_FIELDS, parse_backend, parse_ready

# a change is dated by the check that saw it only when the check before was this recent
DATED_GAP_S = 5.0


class ReadyDates:
    """The last verdict on each backend: (ready, checked at, changed at or None)."""

    def __init__(self) -> None:
        self.last: dict[str, tuple[bool, float, float | None]] = {}
        self.seeded = False

    def seed(self, raw: str | None) -> None:
        """Start from the ``gpucon:ready`` document a checker wrote before (None: none)."""
        self.seeded = True
        entries, _ = parse_ready(raw)
        for name, texts in entries.items():
            b, _problems = parse_backend(
                name, {"state": "active", **dict(zip(READY_FIELDS, texts, strict=False))}
            )
            if b.ready is not None and b.ready_at is not None:
                self.last[name] = (b.ready, b.ready_at, b.ready_since)

    def update(self, verdicts: Mapping[str, tuple[bool, float]]) -> dict[str, float]:
        """Take a health round's verdicts (ready, checked at); returns when each backend's
        verdict last changed, for those it knows."""
        last: dict[str, tuple[bool, float, float | None]] = {}
        for name, (ready, at) in verdicts.items():
            prior = self.last.get(name)
            since: float | None = None
            if prior is not None and prior[0] == ready:
                since = prior[2]
            elif prior is not None and 0.0 <= at - prior[1] <= DATED_GAP_S:
                since = at
            last[name] = (ready, at, since)
        self.last = last
        return {name: v[2] for name, v in last.items() if v[2] is not None}
