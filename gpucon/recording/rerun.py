"""The alert rules run again over a recording, with today's thresholds.

Each frame's snapshot (with the history as it was then) goes through ``derive_alerts`` with
the thresholds given, exactly as the hub runs them live, so a team can see when each alert
would have fired last night had the thresholds been these. SLOs are the recording's, with
the config's per-model SLOs taking precedence where a backend's model has one. The slots'
memory growth runs are kept as the hub keeps them (``model/growth_runs.py``), from each frame's
recorded column, so the memory trend rule looks back only at the few series that may alert
(without them it walked every slot's history back each frame: half of a 512-GPU frame's time).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from gpucon.model.alerts import Alert, AlertInputs, AlertThresholds, derive_alerts
from gpucon.model.growth_runs import GrowthRuns
from gpucon.model.history import History
from gpucon.model.scheduler_beat import SCHEDULER
from gpucon.recording.frames import FrameState
from gpucon.recording.store import AlertSpan, RecordingStore


@dataclass(frozen=True, slots=True)
class RerunResult:
    """The alerts the rules raise over the recording, and those the recording holds."""

    fired: list[AlertSpan]
    recorded: list[AlertSpan]
    frames: int


def rerun_alerts(
    store: RecordingStore,
    thresholds: AlertThresholds,
    slo_p95_ms_by_model: Mapping[str, float] | None = None,
    *,
    until: float | None = None,
) -> RerunResult:
    """The alerts over the whole recording (or its frames up to ``until``). Each frame's
    snapshot decodes only the rows that frame changed (``FrameState.snapshot``)."""
    span = store.span()
    recorded = store.alert_spans()
    if span is None:
        return RerunResult([], recorded, 0)
    state = FrameState()
    history = History()
    # the slots' memory growth runs, as the hub keeps them (None: a file before format 3,
    # whose samples are not columns: the rule walks the history back, as it did)
    mem_runs: GrowthRuns | None = GrowthRuns(history.capacity)
    previous: tuple[Alert, ...] = ()
    open_spans: dict[str, AlertSpan] = {}
    fired: list[AlertSpan] = []
    frames = 0
    for t, kind, frame in store.frames(span[0], until):
        state.apply(t, kind, frame)
        if not state.ready:
            continue
        history = state.append_samples(history)
        if mem_runs is not None:
            column = state.family("slot", "mem_used")
            if column is None:
                mem_runs = None
            else:
                mem_runs.update(history.appended - 1, t, *column)
        snapshot = state.snapshot(history)
        frames += 1
        slo: Mapping[str, float] = snapshot.slo_p95_ms
        if slo_p95_ms_by_model:  # the config's per-model SLOs over the recorded ones
            slo = dict(slo)
            for name, b in snapshot.backends.items():
                if b.model is not None and b.model in slo_p95_ms_by_model:
                    slo[name] = slo_p95_ms_by_model[b.model]
        alerts = derive_alerts(
            AlertInputs(
                t,
                snapshot.slots,
                snapshot.backends,
                snapshot.latency,
                snapshot.queues,
                snapshot.sources,
                history,
                slo,
                gpus=snapshot.gpus,
                nodes=snapshot.nodes,
                mig_pending_since=snapshot.mig_pending_since,
                mig_pending_unseen=snapshot.mig_pending_unseen,
                liveness=snapshot.liveness,
                scheduler_silent_s=snapshot.staleness.sources.get(SCHEDULER),
                mem_runs=mem_runs,
                registry_listed=snapshot.registry_listed,
                scheduler_behind_s=snapshot.scheduler_behind_s,
                scraped=snapshot.scraped,
                registry_departed=snapshot.registry_departed,
                queue_lost=snapshot.queue_lost,
            ),
            thresholds,
            previous,
        )
        now = {a.key: a for a in alerts}
        for key, a in now.items():
            if key not in open_spans:
                open_spans[key] = AlertSpan(
                    a.key, a.rule, a.target, int(a.severity), a.message, a.since, t, None
                )
        for key in [k for k in open_spans if k not in now]:
            fired.append(_ended(open_spans.pop(key), t))
        previous = alerts
    fired.extend(open_spans.values())
    fired.sort(key=lambda s: (s.start, s.key))
    return RerunResult(fired, recorded, frames)


def _ended(span: AlertSpan, end: float) -> AlertSpan:
    return AlertSpan(
        span.key, span.rule, span.target, span.severity, span.message, span.since, span.start, end
    )
