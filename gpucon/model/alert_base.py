"""What every alert rule shares: severities, thresholds, the alert itself and the rules' inputs.

The rules live in ``model.alerts`` (state now), ``model.early_warning`` (trends) and
``model.noisy_neighbour`` (co-tenants); ``model.alert_order`` orders and groups what they raise.
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import IntEnum, StrEnum

import msgspec

from gpucon.model.ages import fmt_elapsed
from gpucon.model.fleet import (
    Backend,
    Gpu,
    LatencyStats,
    NodeInfo,
    QueueStats,
    Slot,
    SourceStatus,
)
from gpucon.model.growth_runs import GrowthRuns
from gpucon.model.history import History
from gpucon.model.liveness import BackendLiveness
from gpucon.model.queue_counts import QueueLost
from gpucon.model.registry_memory import Departed, RegistryListed


class Severity(IntEnum):
    INFO = 0
    WARNING = 1
    CRITICAL = 2


class Cause(StrEnum):
    """Where an alert stands in the chain from cause to symptom (alerts order by it)."""

    # something is down or broken: a backend, a GPU (XID), a MIG reconfiguration, a source
    FAULT = "fault"
    # a resource runs out or is taken: memory, heat, power, a co-tenant, the backends' capacity
    # (a stream backing up: the p95 of every backend behind it rises because of it)
    RESOURCE = "resource"
    # what users feel, often caused by the above: p95, queue wait, hot slots
    SYMPTOM = "symptom"


class AlertThresholds(msgspec.Struct, frozen=True, gc=False):
    """When the alert rules fire (config ``[alerts]``)."""

    # a backend's own queue time (Triton's, in ms), and the age of a shared queue's oldest
    # waiting entry (seconds: a request that waits seconds for a consumer, not milliseconds),
    # each over its threshold for ``queue_wait_for_s``
    queue_wait_ms: float = 20.0
    queue_oldest_s: float = 5.0
    queue_wait_for_s: float = 60.0
    min_free_mem_mib: float = 1536.0
    default_slo_p95_ms: float = 2500.0
    hot_activity_pct: float = 98.0
    hot_for_s: float = 60.0
    stale_after_s: float = 15.0
    # an XID error alerts while it is this recent (one without a time, from DCGM: while
    # reported); these codes are CRIT, others WARN (48 DBE, 63/64 row remap, 74 NVLink,
    # 79 fallen off the bus, 94/95 contained/uncontained ECC)
    xid_alert_s: float = 3600.0
    critical_xids: tuple[int, ...] = (48, 63, 64, 74, 79, 94, 95)
    # power at or over this percent of the enforced limit (or NVML's power cap) this long
    power_limit_pct: float = 98.0
    power_limit_for_s: float = 10.0
    # a node's nvidia.com/mig.config.state pending longer than this (seen by this console)
    mig_pending_for_s: float = 300.0
    # early warning, memory: a slot's memory that grew in at least ``mem_trend_rises`` samples
    # of the last ``mem_trend_window_s`` is extrapolated (least squares since it began to
    # grow); "full in" below the warn horizon is WARN, below the crit horizon CRIT
    mem_trend_window_s: float = 60.0
    mem_trend_rises: int = 3
    mem_full_warn_s: float = 1800.0
    mem_full_crit_s: float = 300.0
    # early warning, queue: the waiting count rose in each of its last 2 (up to
    # ``queue_growth_ticks``) ticks by ``queue_growth_min`` entries or more (a spike); or its
    # least-squares slope over the window is at least ``queue_growth_per_s`` entries a second;
    # either way grown by ``queue_growth_pct`` of what waited before (a deep queue that drifts
    # a little is not a burst) and at least ``queue_growth_min_waiting`` waiting
    queue_growth_ticks: int = 3
    queue_growth_min: float = 10.0
    queue_growth_window_s: float = 30.0
    queue_growth_per_s: float = 0.25
    queue_growth_pct: float = 25.0
    queue_growth_min_waiting: float = 10.0
    # early warning, p95: above this percent of its SLO and rising (least squares over the
    # window, by at least ``p95_rise_pct`` of the SLO across it)
    p95_near_slo_pct: float = 80.0
    p95_trend_window_s: float = 30.0
    p95_rise_pct: float = 5.0
    # noisy neighbour: a co-tenant process whose memory moves with a backend's p95 (Pearson r
    # at least this over the window) while that p95 rose by at least ``noisy_rise_pct``
    noisy_window_s: float = 30.0
    noisy_min_r: float = 0.7
    noisy_rise_pct: float = 10.0


class Alert(msgspec.Struct, frozen=True, gc=False):
    """One firing rule on one target, with how bad it is and since when.

    ``cause`` places it between cause and symptom (it follows from ``rule``); alerts order by
    it before severity, so the cause leads the symptoms it brings.
    """

    key: str  # rule:target, stable across ticks
    rule: str
    target: str
    severity: Severity
    message: str
    since: float
    cause: Cause | None = None

    def __post_init__(self) -> None:
        if self.cause is None:
            msgspec.structs.force_setattr(self, "cause", cause_of(self.rule))


# the rules and where they stand; a rule not listed is a symptom
RULE_CAUSE: dict[str, Cause] = {
    "not_ready": Cause.FAULT,
    "xid": Cause.FAULT,
    "mig_config": Cause.FAULT,
    "stale_source": Cause.FAULT,
    "source_errors": Cause.FAULT,
    "queue_stalled": Cause.FAULT,
    "scheduler_silent": Cause.FAULT,
    "no_backends": Cause.FAULT,
    "scheduler_clock": Cause.FAULT,
    "not_scraped": Cause.FAULT,
    "left_registry": Cause.FAULT,
    "queue_lost": Cause.FAULT,
    "low_memory": Cause.RESOURCE,
    "memory_trend": Cause.RESOURCE,
    "noisy_neighbour": Cause.RESOURCE,
    "thermal": Cause.RESOURCE,
    "power_limit": Cause.RESOURCE,
    "queue_growth": Cause.RESOURCE,
    "one_left": Cause.RESOURCE,
    "p95_slo": Cause.SYMPTOM,
    "p95_trend": Cause.SYMPTOM,
    "queue_wait": Cause.SYMPTOM,
    "hot_slot": Cause.SYMPTOM,
    "no_traffic": Cause.SYMPTOM,
}


def cause_of(rule: str) -> Cause:
    return RULE_CAUSE.get(rule, Cause.SYMPTOM)


class AlertInputs(msgspec.Struct, frozen=True):
    """What the rules look at; the hub builds it from the merged fleet."""

    now: float
    slots: Mapping[str, Slot]
    backends: Mapping[str, Backend]
    latency: Mapping[str, LatencyStats]
    queues: Mapping[str, QueueStats]
    sources: Mapping[str, SourceStatus]
    history: History
    slo_p95_ms: Mapping[str, float] = msgspec.field(default_factory=dict)
    gpus: Mapping[str, Gpu] = msgspec.field(default_factory=dict)
    nodes: Mapping[str, NodeInfo] = msgspec.field(default_factory=dict)
    # node name -> since when its mig.config.state has been "pending" (see track_mig_pending)
    mig_pending_since: Mapping[str, float] = msgspec.field(default_factory=dict)
    # nodes pending already when this console first saw them: their "since" is a lower bound
    mig_pending_unseen: frozenset[str] = frozenset()
    liveness: Mapping[str, BackendLiveness] = msgspec.field(default_factory=dict)
    # the alerts of the previous tick by key (derive_alerts fills it): a rule that measured
    # something once (a correlation) holds its alert while what it named is still there
    previous: Mapping[str, Alert] = msgspec.field(default_factory=dict)
    # each slot's memory growth run, kept by the hub as it appends the history (the memory
    # trend rule's shortcut; without it, or when it is not at this history's tick, the rule
    # walks the history back)
    mem_runs: GrowthRuns | None = None
    # how old the scheduler's heartbeat is when it is silent (``model/scheduler_beat.py``);
    # None while it beats, or when no scheduler writes one
    scheduler_silent_s: float | None = None
    # backends that left the registry while not serving (``model/registry_memory.py``)
    registry_departed: tuple[Departed, ...] = ()
    # the backends this console has seen scraped by Prometheus (``model/scrape_gone.py``)
    scraped: frozenset[str] = frozenset()
    # how far the scheduler's clock is behind Redis's (below 0: ahead), when measured past
    # ``SKEW_WARN_S``
    scheduler_behind_s: float | None = None
    # the registry's last non-empty listing (``model/registry_memory.py``); None: never seen
    registry_listed: RegistryListed | None = None
    # streams whose consumer group's read count went back lately (``model/queue_counts.py``)
    queue_lost: tuple[QueueLost, ...] = ()


# what a rule yields: (rule, target, severity, message)
Found = tuple[str, str, Severity, str]

# the last walk of ``p95_near_or_over``: (the rules' inputs, default SLO, fraction, found)
_P95_WALK: list[tuple[AlertInputs, float, float, list[tuple[str, LatencyStats, float, float]]]]
_P95_WALK = []


def p95_near_or_over(
    i: AlertInputs, near: float, default_slo: float
) -> list[tuple[str, LatencyStats, float, float]]:
    """(name, latency, p95, SLO) of every backend whose p95 is at least ``near`` of its SLO
    (``slo_p95_ms``, else ``default_slo``) or over it, in the latency's order. The p95-over-SLO
    and p95-trend rules both ask it of the same inputs each tick: walked once for both."""
    lowest = min(near, 1.0)
    last = _P95_WALK[0] if _P95_WALK else None
    if last is not None and last[0] is i and last[1] == default_slo and last[2] == lowest:
        return last[3]
    slo_of = i.slo_p95_ms.get
    found = [
        (name, lat, p95, slo)
        for name, lat in i.latency.items()
        if (p95 := lat.p95_ms) is not None and p95 >= lowest * (slo := slo_of(name, default_slo))
    ]
    _P95_WALK[:] = [(i, default_slo, lowest, found)]
    return found


def fmt(value: float, unit: str) -> str:
    return f"{value:.0f}{unit}" if abs(value) >= 10 else f"{value:.1f}{unit}"


def fmt_ms(value: float) -> str:
    """A latency as people read it: ``"850 ms"``, ``"2.4 s"``."""
    return f"{value / 1000:.1f} s" if value >= 1000 else f"{value:.0f} ms"


def fmt_duration(seconds: float) -> str:
    """``"45 s"``, ``"4.8 min"``, ``"2.5 h"``: the unit a person reads a horizon in."""
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 5400:
        return f"{seconds / 60:.1f} min" if seconds < 600 else f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


def fmt_wait(seconds: float) -> str:
    """How long a request has waited: ``"9.6 s"``, ``"45 s"``, ``"4.2 min"``. The queue panel's
    OLDEST and every alert naming the oldest request write it so, and one screen never says
    ``252 s``, ``4.2 min`` and ``4m`` for the same request."""
    return f"{seconds:.1f} s" if seconds < 10 else fmt_duration(seconds)


__all__ = [
    "RULE_CAUSE",
    "Alert",
    "AlertInputs",
    "AlertThresholds",
    "Cause",
    "Found",
    "Severity",
    "cause_of",
    "fmt",
    "fmt_duration",
    "fmt_elapsed",
    "fmt_ms",
    "fmt_wait",
    "p95_near_or_over",
]
