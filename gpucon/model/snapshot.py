"""The Snapshot: one immutable view of the whole fleet per tick, as the UI receives it."""

from __future__ import annotations

from collections.abc import Mapping

import msgspec

from gpucon.model.alerts import Alert
from gpucon.model.fleet import (
    Backend,
    Gpu,
    Health,
    LatencyStats,
    MpsState,
    NodeInfo,
    QueueStats,
    Slot,
    SourceStatus,
)
from gpucon.model.history import History
from gpucon.model.liveness import BackendLiveness
from gpucon.model.queue_counts import QueueLost
from gpucon.model.registry_memory import Departed, RegistryListed
from gpucon.model.staleness import FRESH, Staleness


class Snapshot(msgspec.Struct, frozen=True):
    """The whole fleet at one tick: merged entities, sources' health, alerts, history."""

    taken_at: float
    seq: int = 0
    gpus: Mapping[str, Gpu] = msgspec.field(default_factory=dict)
    slots: Mapping[str, Slot] = msgspec.field(default_factory=dict)
    backends: Mapping[str, Backend] = msgspec.field(default_factory=dict)
    queues: Mapping[str, QueueStats] = msgspec.field(default_factory=dict)
    latency: Mapping[str, LatencyStats] = msgspec.field(default_factory=dict)
    nodes: Mapping[str, NodeInfo] = msgspec.field(default_factory=dict)
    sources: Mapping[str, SourceStatus] = msgspec.field(default_factory=dict)
    alerts: tuple[Alert, ...] = ()
    history: History = msgspec.field(default_factory=History)
    # entity key ("slot:ID", "backend:NAME", ...) -> names of the sources that told of it
    origins: Mapping[str, frozenset[str]] = msgspec.field(default_factory=dict)
    # SLO for p95 latency per backend name (from the config's per-model SLOs)
    slo_p95_ms: Mapping[str, float] = msgspec.field(default_factory=dict)
    # the window req/s and the quantiles are taken over ("1m"); None: no rate source
    rate_window: str | None = None
    # node name -> since when this console has seen its mig.config.state "pending"
    mig_pending_since: Mapping[str, float] = msgspec.field(default_factory=dict)
    # nodes pending already when this console first saw them: "pending ≥5m", a lower bound
    mig_pending_unseen: frozenset[str] = frozenset()
    # the values that are stale now: by entity and field, with their source and its age
    staleness: Staleness = FRESH
    # backend name -> what each readiness signal says and whether it is serving
    liveness: Mapping[str, BackendLiveness] = msgspec.field(default_factory=dict)
    # MPS daemons gpucon reads directly: target (slot id, GPU UUID, VM name) -> their state
    mps: Mapping[str, MpsState] = msgspec.field(default_factory=dict)
    # the registry's last non-empty listing: how many backends, when (``registry_memory``)
    registry_listed: RegistryListed | None = None
    # backends that left the registry while not serving (``registry_memory``)
    registry_departed: tuple[Departed, ...] = ()
    # streams made anew lately: their group's read count went back (``queue_counts``)
    queue_lost: tuple[QueueLost, ...] = ()
    # the backends this console has seen scraped by Prometheus (``scrape_gone``)
    scraped: frozenset[str] = frozenset()
    # how far the scheduler's clock is behind Redis's (below 0: ahead), when measured
    # (``scheduler_beat``)
    scheduler_behind_s: float | None = None

    def backends_on(self, slot_id: str) -> tuple[Backend, ...]:
        return tuple(b for b in self.backends.values() if b.slot_id == slot_id)

    def stale_sources(self) -> frozenset[str]:
        """Sources whose data is stale now (too old, or their newest read failed)."""
        return frozenset(self.staleness.sources)

    def unhealthy_sources(self) -> frozenset[str]:
        return frozenset(n for n, s in self.sources.items() if s.health is not Health.OK)

    def is_stale(self, entity_key: str) -> bool:
        """True when some value of this entity came from a stale source."""
        return entity_key in self.staleness.fields

    def value_age(self, entity_key: str, field_name: str) -> float | None:
        """The age of a stale value (seconds since its reading was taken); None when fresh."""
        return self.staleness.age(entity_key, field_name)
