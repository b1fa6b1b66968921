"""The Snapshot: one immutable view of the whole fleet per tick, as the UI receives it."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from gpucon.model.alerts import Alert
from gpucon.model.fleet import (
    Backend,
    Gpu,
    Health,
    LatencyStats,
    NodeInfo,
    QueueStats,
    Slot,
    SourceStatus,
)
from gpucon.model.history import History
from gpucon.model.liveness import BackendLiveness


@dataclass(frozen=True, slots=True)
class Snapshot:
    """The whole fleet at one tick: merged entities, sources' health, alerts, history."""

    taken_at: float
    seq: int = 0
    gpus: Mapping[str, Gpu] = field(default_factory=dict)
    slots: Mapping[str, Slot] = field(default_factory=dict)
    backends: Mapping[str, Backend] = field(default_factory=dict)
    queues: Mapping[str, QueueStats] = field(default_factory=dict)
    latency: Mapping[str, LatencyStats] = field(default_factory=dict)
    nodes: Mapping[str, NodeInfo] = field(default_factory=dict)
    sources: Mapping[str, SourceStatus] = field(default_factory=dict)
    alerts: tuple[Alert, ...] = ()
    history: History = field(default_factory=History)
    # entity key ("slot:ID", "backend:NAME", ...) -> names of the sources that told of it
    origins: Mapping[str, frozenset[str]] = field(default_factory=dict)
    # SLO for p95 latency per backend name (from the config's per-model SLOs)
    slo_p95_ms: Mapping[str, float] = field(default_factory=dict)
    # backend name -> what each readiness signal says and whether it is serving
    liveness: Mapping[str, BackendLiveness] = field(default_factory=dict)

    def backends_on(self, slot_id: str) -> tuple[Backend, ...]:
        return tuple(b for b in self.backends.values() if b.slot_id == slot_id)

    def stale_sources(self) -> frozenset[str]:
        return frozenset(n for n, s in self.sources.items() if s.health is not Health.OK)

    def is_stale(self, entity_key: str) -> bool:
        """True when any source that told of this entity is not healthy now."""
        stale = self.stale_sources()
        return bool(stale) and bool(self.origins.get(entity_key, frozenset()) & stale)
