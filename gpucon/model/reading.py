"""A Reading: the fragment of the fleet one source knows, with that source's health.

Sources return Readings; the hub merges them into a Snapshot. A Reading never carries an
exception: a failed read is a Reading whose health is ``down`` and whose ``error`` says why.
"""

from __future__ import annotations

import msgspec

from gpucon.model.fleet import (
    Backend,
    Gpu,
    Health,
    LatencyStats,
    MpsState,
    NodeInfo,
    QueueStats,
    Slot,
)
from gpucon.model.liveness import ReadyCheck, TargetUp
from gpucon.redact import redact


class SchedulerBeat(msgspec.Struct, frozen=True, gc=False):
    """The newest scheduler heartbeat one read of Redis found (``model/scheduler_beat.py``)."""

    scheduler: str
    # its age when the read was taken (Redis's clock against the scheduler's), and its period
    age_s: float
    every_s: float
    # when it was written, on the scheduler's clock (None: not read): a new value is a new beat
    at: float | None = None
    # how far ``at`` was ahead of Redis's clock at the read (0: not ahead): the scheduler's
    # clock is ahead by at least that (``age_s`` reads 0 then)
    ahead_s: float = 0.0


class Reading(msgspec.Struct, frozen=True, gc=False):
    """What one source read in one pass: its health and the entities it saw."""

    source: str
    health: Health
    taken_at: float
    duration_s: float = 0.0
    error: str | None = None
    gpus: tuple[Gpu, ...] = ()
    slots: tuple[Slot, ...] = ()
    backends: tuple[Backend, ...] = ()
    queues: tuple[QueueStats, ...] = ()
    latency: tuple[LatencyStats, ...] = ()
    nodes: tuple[NodeInfo, ...] = ()
    # backends' own /v2/health/ready answers, and Prometheus's ``up`` per scrape target
    ready_checks: tuple[ReadyCheck, ...] = ()
    target_up: tuple[TargetUp, ...] = ()
    # MPS control daemons read directly: (target, state), the target as the config names it
    mps: tuple[tuple[str, MpsState], ...] = ()
    # the newest scheduler heartbeat the registry held (None: no scheduler writes one)
    scheduler_beat: SchedulerBeat | None = None
    # network/API round trips this read made (benchmarks check it does not grow with the fleet)
    round_trips: int = 0

    def __post_init__(self) -> None:
        # every source's error is kept and shown (status bar, snapshot, notifications): the
        # credentials an error may quote are masked here, whichever source built the text
        if self.error:
            msgspec.structs.force_setattr(self, "error", redact(self.error))


def failed_reading(source: str, taken_at: float, duration_s: float, error: str) -> Reading:
    """The Reading of a source that could not be read at all."""
    return Reading(
        source=source,
        health=Health.DOWN,
        taken_at=taken_at,
        duration_s=duration_s,
        error=error,
    )
