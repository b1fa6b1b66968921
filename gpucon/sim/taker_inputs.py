"""The simulated backend's fields that decide whether it takes work and how much, counted
when written.

A pool's takers (``sim.takers``) follow from eight fields of its backends (state, readiness,
weight, failing health, speed, interference, batch factor, concurrency), which only an
incident, an action or a re-slice writes. Each is a property whose setter counts a write that
changes it (``edits``), once the field holds the new value (a step that reads the count
between the two sees the change on its next tick at the latest): while the count stands, no
backend's inputs moved, and ``Takers.of`` hands on last tick's takers without building and
comparing a tuple of them per backend (~1 ms a tick at 512 GPUs). A write that changes nothing
is not counted (a scenario's hook sets the same interference each tick).
"""

from __future__ import annotations

from gpucon.model.fleet import BackendState

# the writes that changed an input, in all (one list: a class attribute written each time
# would make the interpreter drop its cached lookups on every backend)
_EDITS = [0]


def edits() -> int:
    """How many writes changed a backend's input so far (any backend, any pool)."""
    return _EDITS[0]


class TakerInputs:
    """``SimBackend``'s inputs to ``Takers``, each counted when written."""

    __slots__ = (
        "_batch_factor",
        "_concurrency",
        "_fails_health",
        "_interference",
        "_ready",
        "_service_s",
        "_state",
        "_weight",
    )

    @property
    def state(self) -> BackendState:
        return self._state

    @state.setter
    def state(self, value: BackendState) -> None:
        changed = getattr(self, "_state", None) is not value
        self._state = value
        if changed:
            _EDITS[0] += 1

    @property
    def ready(self) -> bool:
        return self._ready

    @ready.setter
    def ready(self, value: bool) -> None:
        changed = getattr(self, "_ready", None) is not value
        self._ready = value
        if changed:
            _EDITS[0] += 1

    @property
    def weight(self) -> float:
        return self._weight

    @weight.setter
    def weight(self, value: float) -> None:
        changed = getattr(self, "_weight", None) != value
        self._weight = value
        if changed:
            _EDITS[0] += 1

    @property
    def fails_health(self) -> bool:
        return self._fails_health

    @fails_health.setter
    def fails_health(self, value: bool) -> None:
        changed = getattr(self, "_fails_health", None) is not value
        self._fails_health = value
        if changed:
            _EDITS[0] += 1

    @property
    def service_s(self) -> float:
        return self._service_s

    @service_s.setter
    def service_s(self, value: float) -> None:
        changed = getattr(self, "_service_s", None) != value
        self._service_s = value
        if changed:
            _EDITS[0] += 1

    @property
    def interference(self) -> float:
        return self._interference

    @interference.setter
    def interference(self, value: float) -> None:
        changed = getattr(self, "_interference", None) != value
        self._interference = value
        if changed:
            _EDITS[0] += 1

    @property
    def batch_factor(self) -> float:
        return self._batch_factor

    @batch_factor.setter
    def batch_factor(self, value: float) -> None:
        changed = getattr(self, "_batch_factor", None) != value
        self._batch_factor = value
        if changed:
            _EDITS[0] += 1

    @property
    def concurrency(self) -> int:
        return self._concurrency

    @concurrency.setter
    def concurrency(self, value: int) -> None:
        changed = getattr(self, "_concurrency", None) != value
        self._concurrency = value
        if changed:
            _EDITS[0] += 1
