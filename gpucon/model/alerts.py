"""Alert rules: pure functions from a fleet view, its history and thresholds to alerts.

The rules: queue wait over 20 ms for a minute; free memory under 1.5 GB on a slot; p95 over the
backend's SLO; a slot at 98 % activity or more for a minute; a backend not ready; a source
stale; GPU health (a recent XID error, thermal slowdown, power at its limit for a while); a
Kubernetes node whose MIG reconfiguration failed or stays pending too long. Then the trends
(``model.early_warning``: memory full in N min, queue growing, p95 nearing its SLO) and the
noisy-neighbour hint (``model.noisy_neighbour``). Thresholds are settings (config
``[alerts]``). ``derive_alerts`` orders the result causes first (``model.alert_order``);
``group_alerts`` gives one group per target.

p95 is judged only on a backend that takes work: a draining, drained or down backend, or one
that is not serving, raises none, and one with no traffic gets "no traffic" (info) instead,
since its p95 is left over from earlier requests. A backend no readiness signal vouches for is
named by the ``not_ready`` rule (critical when the signals say not ready).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import TypeVar

from msgspec.structs import replace

from gpucon.model import (
    early_warning,
    noisy_neighbour,
    queue_loss,
    queue_slo,
    queue_stall,
    redundancy,
    scheduler_beat,
    scrape_gone,
)
from gpucon.model.alert_base import (
    Alert,
    AlertInputs,
    AlertThresholds,
    Cause,
    Severity,
    cause_of,
    fmt_elapsed,
    fmt_wait,
    p95_near_or_over,
)
from gpucon.model.alert_base import fmt as _fmt
from gpucon.model.alert_causes import with_likely_causes
from gpucon.model.alert_order import AlertGroup, group_alerts, ordered
from gpucon.model.fleet import Backend, BackendState, Gpu, Health, NodeInfo
from gpucon.model.history import sustained
from gpucon.model.liveness import BackendLiveness, aged_because
from gpucon.model.xid import xid_meaning

__all__ = [
    "NO_TRAFFIC_RPS",
    "RULES",
    "Alert",
    "AlertGroup",
    "AlertInputs",
    "AlertThresholds",
    "Cause",
    "Severity",
    "cause_of",
    "derive_alerts",
    "gpu_target",
    "group_alerts",
    "track_mig_pending",
    "track_mig_unseen",
]

# a rate below this is no traffic (Prometheus's rate() of an idle counter is exactly 0)
NO_TRAFFIC_RPS = 0.005
_NOT_TAKING_WORK = frozenset({BackendState.DRAINING, BackendState.DRAINED, BackendState.DOWN})
E = TypeVar("E")


def _over(
    i: AlertInputs, kind: str, series: str, above: float, items: Iterable[tuple[str, E]]
) -> list[tuple[str, E]]:
    """The (id, entity) pairs of ``items``, in order, whose newest ``kind:ID:series`` sample
    is known and at least ``above``: the only ones a ``sustained`` rule needs to look at
    (read off the family's newest block in one pass when the history keeps one)."""
    hits = i.history.newest_at_least(kind, series, above)
    if hits is None:  # not kept as a family: each series asked
        last = i.history.last
        return [
            (x, e)
            for x, e in items
            if (v := last(f"{kind}:{x}:{series}")) is not None and v >= above
        ]
    if not hits:
        return []
    return [(x, e) for x, e in items if x in hits]


def _queue_wait(i: AlertInputs, t: AlertThresholds) -> Iterable[tuple[str, str, Severity, str]]:
    for name, lat in _over(i, "backend", "queue_ms", t.queue_wait_ms, i.latency.items()):
        key = f"backend:{name}:queue_ms"
        if sustained(i.history, key, i.now, t.queue_wait_for_s, t.queue_wait_ms):
            wait_ms = lat.queue_ms or 0.0
            yield (
                "queue_wait",
                name,
                Severity.WARNING,
                f"queue wait {_fmt(wait_ms, ' ms')} > {_fmt(t.queue_wait_ms, ' ms')} "
                f"for {t.queue_wait_for_s:.0f}s",
            )
    for stream, q in _over(i, "queue", "oldest", t.queue_oldest_s, i.queues.items()):
        key = f"queue:{stream}:oldest"
        if sustained(i.history, key, i.now, t.queue_wait_for_s, t.queue_oldest_s):
            age_s = q.oldest_age_s or 0.0
            yield (
                "queue_wait",
                stream,
                Severity.WARNING,
                f"oldest entry {fmt_wait(age_s)} old > {fmt_wait(t.queue_oldest_s)} "
                f"for {t.queue_wait_for_s:.0f}s",
            )


def _low_memory(i: AlertInputs, t: AlertThresholds) -> Iterable[tuple[str, str, Severity, str]]:
    least = t.min_free_mem_mib
    # one comprehension over every slot (``Slot.mem_free_mib`` inlined): few are low
    low = [
        s
        for s in i.slots.values()
        if (used := s.mem_used_mib) is not None
        and (total := s.mem_total_mib) is not None
        and total - used < least
    ]
    for slot in low:
        free = slot.mem_free_mib
        if free is not None and free < least:
            yield (
                "low_memory",
                slot.id,
                Severity.CRITICAL,
                f"{free / 1024:.2f} GiB free < {t.min_free_mem_mib / 1024:.2f} GiB",
            )


def _p95_breach(i: AlertInputs, t: AlertThresholds) -> Iterable[tuple[str, str, Severity, str]]:
    # the walk the p95 trend rule shares (it asks for the same fraction)
    near = t.p95_near_slo_pct / 100.0
    over = [f for f in p95_near_or_over(i, near, t.default_slo_p95_ms) if f[2] > f[3]]
    for name, lat, p95, slo in over:
        b = i.backends.get(name)
        if b is not None and b.state in _NOT_TAKING_WORK:
            continue  # the operator or the scheduler took it out: no traffic is expected
        lv = i.liveness.get(name)
        if lv is not None and lv.serving is False:
            continue  # the not_ready alert says what matters
        if lat.req_per_s is not None and lat.req_per_s < NO_TRAFFIC_RPS:
            yield (
                "no_traffic",
                name,
                Severity.INFO,
                f"no traffic (p95 {_fmt(p95, ' ms')} is from earlier requests)",
            )
            continue
        yield (
            "p95_slo",
            name,
            Severity.CRITICAL,
            f"p95 {_fmt(p95, ' ms')} > SLO {_fmt(slo, ' ms')}",
        )


def _hot_slot(i: AlertInputs, t: AlertThresholds) -> Iterable[tuple[str, str, Severity, str]]:
    slots = ((s.id, s) for s in i.slots.values())
    for _, slot in _over(i, "slot", "activity", t.hot_activity_pct, slots):
        key = f"slot:{slot.id}:activity"
        if sustained(i.history, key, i.now, t.hot_for_s, t.hot_activity_pct):
            yield (
                "hot_slot",
                slot.id,
                Severity.WARNING,
                f"activity ≥ {t.hot_activity_pct:.0f}% for {t.hot_for_s:.0f}s "
                f"({slot.activity_metric or 'activity'})",
            )


# more backends than this that nothing vouches for make one alert, not one each: it is one cause
# (a readiness source gone quiet), and a list of them would push the real alerts off the panel
UNVOUCHED_ONE_BY_ONE = 3


# the last walk of ``_not_ready``'s backends: (liveness verdicts, backend names, their states,
# the names of those it looked at)
_NOT_READY_WALK: list[tuple[object, list[str], list[BackendState], list[str]]] = []


def _not_ready_candidates(i: AlertInputs) -> list[Backend]:
    """The backends ``_not_ready`` looks at: all but those that serve, vouched for, and take
    work. Whether one does follows from its verdict and its state alone: while the verdicts
    are last tick's (the same mapping: the hub's liveness book hands it on) and the backends
    and their states are the same (a column compared in C), the same ones, read from this
    tick's backends (every one a new object, as a live source builds them)."""
    backends = i.backends
    names = list(backends)
    states = [b.state for b in backends.values()]
    last = _NOT_READY_WALK[0] if _NOT_READY_WALK else None
    if last is not None and last[0] is i.liveness and last[1] == names and last[2] == states:
        return [backends[name] for name in last[3]]
    live = i.liveness.get
    quiet = (BackendState.DOWN, BackendState.DRAINED)
    found = [
        b
        for b in backends.values()
        if not ((lv := live(b.name)) is not None and lv.serving is True and b.state not in quiet)
    ]
    _NOT_READY_WALK[:] = [(i.liveness, names, states, [b.name for b in found])]
    return found


def _not_ready(i: AlertInputs, t: AlertThresholds) -> Iterable[tuple[str, str, Severity, str]]:
    unvouched: list[tuple[str, str]] = []
    # most backends serve, vouched for, taking work: nothing to say, decided in one pass
    for b in _not_ready_candidates(i):
        lv = i.liveness.get(b.name)
        if b.state is BackendState.DOWN:
            yield ("not_ready", b.name, Severity.CRITICAL, _down_message(b, lv, i.now))
            continue
        if b.state is BackendState.DRAINED:
            # taken out on purpose, and it may well be stopped: a reminder, not an alarm,
            # that it must be fixed before it is undrained
            if lv is not None and lv.serving is False:
                aged = aged_because(lv, i.now)
                why = f"drained and not ready ({aged}): fix it before undraining it"
                yield ("not_ready", b.name, Severity.INFO, why)
            continue
        if lv is None:
            if b.ready is False and b.state is BackendState.ACTIVE:
                yield ("not_ready", b.name, Severity.CRITICAL, "not ready (registry ready=0)")
        elif lv.serving is False:
            yield ("not_ready", b.name, Severity.CRITICAL, f"not ready: {aged_because(lv, i.now)}")
        elif lv.disputed and lv.serving is None:
            disputed = aged_because(lv, i.now)
            yield ("not_ready", b.name, Severity.WARNING, f"readiness disputed: {disputed}")
        elif lv.serving is None and b.state is BackendState.ACTIVE:
            unvouched.append((b.name, lv.because))
    if len(unvouched) <= UNVOUCHED_ONE_BY_ONE:
        for name, because in unvouched:
            yield ("not_ready", name, Severity.INFO, f"nothing vouches: {because}")
        return
    names = sorted(name for name, _ in unvouched)
    shown = ", ".join(names[:UNVOUCHED_ONE_BY_ONE])
    yield (
        "not_ready",
        "backends",
        Severity.INFO,
        f"nothing vouches for {len(names)} backends ({shown}, …): {unvouched[0][1]}",
    )


REASON_CHARS = 80  # of a registry reason in an alert: the detail screen shows it whole


def _down_message(b: Backend, lv: BackendLiveness | None, now: float) -> str:
    """``backend down: scheduler marked it down (health check failed: connection refused);
    readiness: http refused``: who said so and why, and what its readiness says now."""
    who = f"{b.owner} marked it down" if b.owner else "the registry says down"
    if b.reason:
        reason = b.reason if len(b.reason) <= REASON_CHARS else b.reason[: REASON_CHARS - 1] + "…"
        who += f" ({reason})"
    readiness = "" if lv is None or not lv.because else f"; readiness: {aged_because(lv, now)}"
    return f"backend down: {who}{readiness}"


def _stale_source(i: AlertInputs, t: AlertThresholds) -> Iterable[tuple[str, str, Severity, str]]:
    """A source down or stale: WARN, its values are shown dimmed with their age. The queue's
    source (Redis) is CRIT: it holds the request queue, so while it is out nobody can tell
    how many requests wait, for how long, or whether they are served at all (the queue
    rules fall silent), and the registry's states are as of its last read. A source that read
    with errors while its values are fresh (``degraded``) is ``source_errors``, WARN, with its
    error: the status bar says ``ERR`` and this is where the error is on screen."""
    for name, s in i.sources.items():
        age = s.age_s(i.now)
        answered = s.last_read_s is not None  # a read came back (and failed, if age is None)
        if (
            age is None
            and not answered
            and s.started_at is not None
            and i.now - s.started_at < t.stale_after_s
        ):
            continue  # its first read is still within time
        if s.health is Health.DOWN or age is None or age > t.stale_after_s:
            shown = "never read" if age is None else f"last good read {fmt_elapsed(age)} ago"
            detail = f": {s.error}" if s.error else ""
            if name == queue_stall.QUEUE_SOURCE:
                yield (
                    "stale_source",
                    name,
                    Severity.CRITICAL,
                    f"queue depth and wait unknown{_streams(i)}; registry not current: "
                    f"source stale, {shown}{detail}",
                )
            else:
                yield ("stale_source", name, Severity.WARNING, f"source stale, {shown}{detail}")
        elif s.health is Health.DEGRADED and s.error:
            # read, with errors: its values are fresh, the status bar says ERR, and this is
            # where the error is on screen (a stream without its group, a query refused)
            yield ("source_errors", name, Severity.WARNING, f"read with errors: {s.error}")


def _not_ready_began(i: AlertInputs, target: str, since: float) -> float:
    """A backend marked down is so since its registry state changed (``changed_at``), or
    since the first signal that said not ready, as dated (``fault_began``), whichever came
    first; a drained one's reminder since it was found not ready (not since the drain)."""
    b = i.backends.get(target)
    if b is not None and b.state is BackendState.DOWN and b.changed_at is not None:
        since = min(since, b.changed_at)
    lv = i.liveness.get(target)
    began = None if lv is None else lv.fault_began()
    return since if began is None else min(since, began.at)


def _outage_began(i: AlertInputs, source: str, since: float) -> float:
    """A source's outage is as old as its last good read: the alert's age is the status bar's
    ``DOWN 15s`` (and a console started mid-outage does not call it new)."""
    status = i.sources.get(source)
    last_ok = None if status is None else status.last_ok_at
    return since if last_ok is None else min(since, last_ok)


def _streams(i: AlertInputs) -> str:
    """`` (gen:queue)``: the streams whose queue is unknown; ``""`` when none was ever read."""
    names = sorted(i.queues)
    if not names:
        return ""
    more = f", +{len(names) - 2}" if len(names) > 2 else ""
    return f" ({', '.join(names[:2])}{more})"


def gpu_target(gpu: Gpu) -> str:
    """How alerts name a GPU: ``host/gpuN``, its whole-GPU slot id."""
    return f"{gpu.host}/gpu{gpu.index}"


def track_mig_unseen(
    previous_unseen: frozenset[str],
    previous_nodes: Mapping[str, NodeInfo] | None,
    nodes: Mapping[str, NodeInfo],
) -> frozenset[str]:
    """The nodes pending now whose pending began before this console could see it: pending
    when first seen (``previous_nodes`` None: this is the first look; a node not in it is new
    to this console), and still pending since. Their ``pending for`` is a lower bound."""
    unseen = set()
    for name, node in nodes.items():
        if node.mig_config_state != "pending":
            continue
        before = None if previous_nodes is None else previous_nodes.get(name)
        if before is None or (before.mig_config_state == "pending" and name in previous_unseen):
            unseen.add(name)
    return frozenset(unseen)


def track_mig_pending(
    previous: Mapping[str, float], nodes: Mapping[str, NodeInfo], now: float
) -> dict[str, float]:
    """Since when each node's ``mig.config.state`` has been ``pending``, carried tick to tick.

    The label holds no time: "since" is when this console first saw it pending.
    """
    return {
        name: previous.get(name, now)
        for name, node in nodes.items()
        if node.mig_config_state == "pending"
    }


def _xid(i: AlertInputs, t: AlertThresholds) -> Iterable[tuple[str, str, Severity, str]]:
    for gpu in i.gpus.values():
        code = gpu.xid_last
        if not code:  # None, or DCGM's 0: no XID
            continue
        if gpu.xid_at is not None and i.now - gpu.xid_at > t.xid_alert_s:
            continue
        meaning = xid_meaning(code)
        when = "" if gpu.xid_at is None else f", {fmt_elapsed(i.now - gpu.xid_at)} ago"
        yield (
            "xid",
            gpu_target(gpu),
            Severity.CRITICAL if code in t.critical_xids else Severity.WARNING,
            f"XID {code}{f' ({meaning})' if meaning else ''} on {gpu.name or 'GPU'} "
            f"{gpu.uuid}{when}",
        )


def _xid_at(i: AlertInputs, target: str) -> float | None:
    """When the XID error on the GPU an ``xid`` alert names happened (None: not dated)."""
    return next((g.xid_at for g in i.gpus.values() if gpu_target(g) == target), None)


def _thermal(i: AlertInputs, t: AlertThresholds) -> Iterable[tuple[str, str, Severity, str]]:
    for gpu in i.gpus.values():
        if gpu.thermal_slowdown:
            temp = "n/a" if gpu.temperature_c is None else _fmt(gpu.temperature_c, "°C")
            yield ("thermal", gpu_target(gpu), Severity.WARNING, f"thermal slowdown at {temp}")


def _power_limit(i: AlertInputs, t: AlertThresholds) -> Iterable[tuple[str, str, Severity, str]]:
    gpus = [(g.uuid, g) for g in i.gpus.values()]
    at_limit = {
        uuid
        for uuid, _ in (
            *_over(i, "gpu", "power_pct", t.power_limit_pct, gpus),
            *_over(i, "gpu", "power_capped", 1, gpus),
        )
    }
    for gpu in (g for uuid, g in gpus if uuid in at_limit) if at_limit else ():
        at_pct = sustained(
            i.history, f"gpu:{gpu.uuid}:power_pct", i.now, t.power_limit_for_s, t.power_limit_pct
        )
        capped = sustained(i.history, f"gpu:{gpu.uuid}:power_capped", i.now, t.power_limit_for_s, 1)
        if at_pct or capped:
            if gpu.power_w is None:
                drawn = "n/a"
            elif gpu.power_limit_w is None:
                drawn = f"{gpu.power_w:.0f} W"
            else:
                drawn = f"{gpu.power_w:.0f}/{gpu.power_limit_w:.0f} W"
            why = "power capped" if capped else f"≥ {t.power_limit_pct:.0f}% of limit"
            yield (
                "power_limit",
                gpu_target(gpu),
                Severity.WARNING,
                f"power at its limit ({drawn}, {why}) for {t.power_limit_for_s:.0f}s",
            )


def _mig_config(i: AlertInputs, t: AlertThresholds) -> Iterable[tuple[str, str, Severity, str]]:
    for name, node in i.nodes.items():
        config = node.mig_config or "n/a"
        if node.mig_config_state == "failed":
            yield (
                "mig_config",
                name,
                Severity.CRITICAL,
                f"MIG reconfiguration to {config} failed (mig.config.state=failed)",
            )
        elif node.mig_config_state == "pending":
            since = i.mig_pending_since.get(name)
            if since is not None and i.now - since >= t.mig_pending_for_s:
                at_least = "≥" if name in i.mig_pending_unseen else ""
                yield (
                    "mig_config",
                    name,
                    Severity.WARNING,
                    f"MIG reconfiguration to {config} pending for "
                    f"{at_least}{fmt_elapsed(i.now - since)} "
                    f"(> {t.mig_pending_for_s:.0f}s)",
                )


RULES = (
    _queue_wait,
    _low_memory,
    _p95_breach,
    _hot_slot,
    _not_ready,
    _stale_source,
    _xid,
    _thermal,
    _power_limit,
    _mig_config,
    *early_warning.RULES,
    *noisy_neighbour.RULES,
    *queue_stall.RULES,
    *queue_slo.RULES,
    *scheduler_beat.RULES,
    *scrape_gone.RULES,
    *redundancy.RULES,
    *queue_loss.RULES,
)


def derive_alerts(
    inputs: AlertInputs,
    thresholds: AlertThresholds,
    previous: Iterable[Alert] = (),
    between_rules: Callable[[], object] | None = None,
) -> tuple[Alert, ...]:
    """Alerts active now, worst first and causes before symptoms among equals
    (``model.alert_order``), each symptom naming its likely cause (``model.alert_causes``);
    ``since`` carries over from ``previous``, which rules that hold an alert also read.

    ``between_rules`` is called before each rule after the first: the hub's thread gives way
    there while the UI answers a key (the rules over a large fleet take tens of ms in all)."""
    by_key = {a.key: a for a in previous}
    if by_key and not inputs.previous:
        inputs = replace(inputs, previous=by_key)
    alerts: list[Alert] = []
    for index, rule in enumerate(RULES):
        if between_rules is not None and index:
            between_rules()
        for name, target, severity, message in rule(inputs, thresholds):
            key = f"{name}:{target}"
            held = by_key.get(key)
            since = inputs.now if held is None else held.since
            if name == "stale_source":
                since = min(since, _outage_began(inputs, target, since))
            elif name == "scheduler_silent" and inputs.scheduler_silent_s is not None:
                since = min(since, inputs.now - inputs.scheduler_silent_s)  # its last beat
            elif name == "not_ready":
                since = min(since, _not_ready_began(inputs, target, since))
            elif (
                name == "queue_slo"
                and (past := queue_slo.past_slo_since(inputs, thresholds, target)) is not None
            ):
                since = min(since, past)  # the oldest entry's id dates it
            elif name == "xid" and (at := _xid_at(inputs, target)) is not None:
                since = min(since, at)  # the error's own time, as NVML or the log gave it
            elif name == "queue_lost" and (lost := queue_loss.lost_at(inputs, target)):
                since = min(since, lost)  # the first read that saw the count go back
            elif name == "left_registry" and (left := queue_stall.departed_at(inputs, target)):
                since = min(since, left)
            elif name == "no_backends" and (gone := queue_stall.no_backends_since(inputs)):
                since = min(since, gone)  # the registry's own date
            elif name == "queue_stalled" and (q := inputs.queues.get(target)) is not None:
                idle = q.consumer_idle_s  # since the last read, which Redis remembers
                since = since if idle is None else min(since, inputs.now - idle)
            alerts.append(Alert(key, name, target, severity, message, since))
    return ordered(with_likely_causes(alerts, inputs.backends))
