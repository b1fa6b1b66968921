"""One snapshot as ``gpucon snapshot`` prints it: the JSON document (``snapshot_document``,
a stable shape, every entity with ``age_s``, ``stale`` and ``stale_fields``) and the short
text table (``snapshot_text``: GPUs, slots, backends, GPU health, nodes and readiness), with
untrusted text cut to its column and its control codes removed.

Only the standard library is imported at module level (the model only for annotations).
"""

from __future__ import annotations

import dataclasses
import enum
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from gpucon.model.fleet import QueueStats
    from gpucon.model.snapshot import Snapshot


def jsonable(value: Any) -> Any:
    """Records (msgspec Structs), dataclasses, enums, tuples and mappings as plain JSON values."""
    if isinstance(value, enum.IntEnum):
        return value.name.lower()
    if isinstance(value, enum.Enum):
        return value.value
    names = getattr(value.__class__, "__struct_fields__", None)  # a model record (msgspec)
    if names is not None:
        return {name: jsonable(getattr(value, name)) for name in names}
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: jsonable(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [jsonable(v) for v in value]
    if isinstance(value, float) and value != value:  # NaN is not JSON
        return None
    return value


def _entity(snapshot: Snapshot, key: str, value: Any) -> dict[str, Any]:
    """One entity as JSON, with how old its data is and which of its values are stale."""
    doc: dict[str, Any] = jsonable(value)
    ages = [
        a
        for src in snapshot.origins.get(key, ())
        if (s := snapshot.sources.get(src)) is not None
        and (a := s.age_s(snapshot.taken_at)) is not None
    ]
    stale = snapshot.staleness
    by_field = stale.fields.get(key, {})
    doc["age_s"] = round(max(ages), 3) if ages else None
    doc["stale"] = bool(by_field)
    doc["stale_fields"] = {
        f: {"age_s": round(stale.sources.get(src, 0.0), 3), "source": src}
        for f, src in sorted(by_field.items())
    }
    return doc


def _source(snapshot: Snapshot, name: str) -> dict[str, Any]:
    status = snapshot.sources[name]
    doc: dict[str, Any] = jsonable(status)
    age = status.age_s(snapshot.taken_at)
    doc["age_s"] = None if age is None else round(age, 3)
    # a source whose every read failed has no age, and is no less stale: its newest read failed
    down = str(getattr(status.health, "value", status.health)) == "down"
    doc["stale"] = name in snapshot.staleness.sources or down
    return doc


def snapshot_document(snapshot: Snapshot, fleet: str) -> dict[str, Any]:
    """The JSON shape of ``gpucon snapshot --json``.

    Every gpu, slot, backend, queue and latency entry carries ``age_s`` (seconds since the
    oldest reading it draws on was taken), ``stale`` (true when any of its values is stale)
    and ``stale_fields`` (field -> ``{"age_s", "source"}`` for each stale value); a queue
    also ``oldest_wait_s`` and ``oldest_wait_at_least`` (``_queue``); every source carries
    ``age_s`` (of its last good reading), ``stale`` and ``stale_after_s``.
    """

    def items(mapping: Any, kind: str) -> list[Any]:
        return [_entity(snapshot, f"{kind}:{k}", mapping[k]) for k in sorted(mapping)]

    nodes = [
        {
            **_entity(snapshot, f"node:{k}", snapshot.nodes[k]),
            "mig_pending_since": snapshot.mig_pending_since.get(k),
            # pending already at this console's first look: the since is a lower bound
            "mig_pending_since_at_least": k in snapshot.mig_pending_unseen,
        }
        for k in sorted(snapshot.nodes)
    ]
    return {
        "taken_at": snapshot.taken_at,
        "seq": snapshot.seq,
        "fleet": fleet,
        "rate_window": snapshot.rate_window,
        "gpus": items(snapshot.gpus, "gpu"),
        "slots": items(snapshot.slots, "slot"),
        "backends": items(snapshot.backends, "backend"),
        "queues": [_queue(snapshot, k) for k in sorted(snapshot.queues)],
        "latency": items(snapshot.latency, "latency"),
        "nodes": nodes,
        "liveness": [liveness_item(snapshot, name) for name in sorted(snapshot.liveness)],
        "sources": [_source(snapshot, name) for name in sorted(snapshot.sources)],
        "alerts": [jsonable(a) for a in snapshot.alerts],
    }


def _queue(snapshot: Snapshot, stream: str) -> dict[str, Any]:
    """One queue as JSON, with ``oldest_wait_s``: its oldest wait now, and
    ``oldest_wait_at_least``: true when that is a lower bound (the read is stale and something
    waited then: its ``oldest_age_s`` as read, plus the read's age)."""
    from gpucon.model.queue_wait import oldest_wait

    q = snapshot.queues[stream]
    doc = _entity(snapshot, f"queue:{stream}", q)
    wait = oldest_wait(q, snapshot.staleness)
    doc["oldest_wait_s"] = None if wait is None else round(wait.seconds, 3)
    doc["oldest_wait_at_least"] = wait is not None and wait.at_least
    return doc


def liveness_item(snapshot: Snapshot, name: str) -> dict[str, Any]:
    """One backend's liveness, with the time each signal was read (its source's last good
    read; the registry's is its ``ready_at``)."""
    lv = snapshot.liveness[name]
    item: dict[str, Any] = jsonable(lv)

    def read_at(source: str | None) -> float | None:
        status = snapshot.sources.get(source) if source else None
        return None if status is None else status.last_ok_at

    item["http_checked_at"] = read_at(lv.http_source)
    item["prom_checked_at"] = read_at(lv.prom_source)
    return item


def _ready_word(snapshot: Snapshot, name: str) -> str:
    lv = snapshot.liveness.get(name)
    if lv is None:
        return "n/a"
    return {True: "yes", False: "NO", None: "?"}[lv.serving]


def _num(value: float | None, unit: str = "", digits: int = 0) -> str:
    return "n/a" if value is None else f"{value:.{digits}f}{unit}"


# the widest a free-text column (a slot's backends, an error, an alert) may run
LAST_COLUMN = 80


def _col(value: object, width: int) -> str:
    """Untrusted ``value`` as one column: control codes removed, cut to ``width`` terminal
    cells with an ellipsis and padded to it (a CJK character counts two cells)."""
    from gpucon.widgets.safe_text import clean, pad

    return pad(clean(value), width)


def _tail(value: object, width: int = LAST_COLUMN) -> str:
    """The last column of a row: cut like the others, not padded."""
    from gpucon.widgets.safe_text import clean, fit

    return fit(clean(value), width)


def snapshot_text(snapshot: Snapshot, fleet: str, default_slo_ms: float | None = None) -> list[str]:
    """A short text view: sources, slots with their backends, backends (with or without a
    known slot), queues, alerts. Every column holds its width whatever the fleet names hold.
    A backend whose model has no SLO of its own is held to ``default_slo_ms`` (``[alerts]
    default_slo_p95_ms``), as in the console and the alert rules."""
    from gpucon.model.ids import (
        escaped_name,  # a name the verbs accept, control codes shown
        known_slot_count,  # as the console's header counts them
    )
    from gpucon.widgets.alert_lines import age_text, watched_from  # as the console writes it

    known = known_slot_count(snapshot.slots, (b.slot_id for b in snapshot.backends.values()))
    lines = [f"fleet {_tail(fleet, 40)} · {known} slots · seq {snapshot.seq}"]
    for name in sorted(snapshot.sources):
        s = snapshot.sources[name]
        error = f"  {_tail(s.error)}" if s.error else ""
        lines.append(f"  source {_col(name, 11)} {s.health.value:<9}{error}")
    lines.append("")
    lines.append(f"{'SLOT':<28} {'PROFILE':<14} {'ACTIVITY':>8} {'MEM MiB':>15}  BACKENDS")
    for sid in sorted(snapshot.slots):
        slot = snapshot.slots[sid]
        mem = f"{_num(slot.mem_used_mib)}/{_num(slot.mem_total_mib)}"
        backends = ", ".join(
            f"{escaped_name(b.name)}({b.state.value})" for b in snapshot.backends_on(slot.id)
        )
        lines.append(
            f"{_col(sid, 28)} {_col(slot.profile or '', 14)} "
            f"{_num(slot.activity_pct, '%'):>8} {mem:>15}  {_tail(backends)}".rstrip()
        )
    if known and not snapshot.slots:  # no GPU source: the slots the backends name
        lines.append(f"  (no GPU source read: the {known} slots are the backends' below)")
    lines.extend(_gpu_and_node_lines(snapshot))
    if snapshot.backends:
        window = f"REQ/S {snapshot.rate_window}" if snapshot.rate_window else "REQ/S"
        lines.append("")
        lines.append(
            f"{'BACKEND':<24} {'SLOT':<24} {'STATE':<9} {'WEIGHT':>6} {'INFL':>5} "
            f"{'P95/SLO ms':>13} {window:>9} {'READY':<5}"
        )
        for name in sorted(snapshot.backends):
            b = snapshot.backends[name]
            lat = snapshot.latency.get(name)
            slo = snapshot.slo_p95_ms.get(name, default_slo_ms)
            p95 = _num(lat.p95_ms if lat else None) + ("" if slo is None else f"/{_num(slo)}")
            lines.append(
                f"{_col(escaped_name(name), 24)} {_col(b.slot_id or '', 24)} "
                f"{b.state.value:<9} {_num(b.weight):>6} {_num(b.inflight):>5} {p95:>13} "
                f"{_num(lat.req_per_s if lat else None, digits=1):>9} "
                f"{_ready_word(snapshot, name):<5}"
            )
    if snapshot.queues:
        lines.append("")
        lines.append(
            f"{'QUEUE':<20} {'WAITING':>7} {'PENDING':>8} {'LAG':>7} {'OLDEST':>8} {'LEN':>7}"
        )
        for stream in sorted(snapshot.queues):
            q = snapshot.queues[stream]
            lines.append(
                f"{_col(stream, 20)} {_num(q.waiting):>7} {_num(q.pending):>8} "
                f"{_num(q.lag):>7} {_oldest(snapshot, q):>8} {_num(q.length):>7}"
            )
    if snapshot.alerts:
        lines.append("")
        watched = watched_from(snapshot)
        for alert in snapshot.alerts:
            # how long it has lasted, as the console's alert panel says it (n/a: this one look
            # is all there is, and no source dated it)
            age = age_text(alert, snapshot.taken_at, watched)
            lines.append(
                f"! {alert.severity.name.lower():<8} {age:>4} {_tail(alert.target, 40)}: "
                f"{_tail(alert.message, 120)}"
            )
    return lines


def _oldest(snapshot: Snapshot, q: QueueStats) -> str:
    """A queue's oldest wait as the console writes it (``9.6 s``, ``7.9 min``; ``≥45 s`` a
    lower bound while its read is stale)."""
    from gpucon.model.queue_wait import oldest_wait
    from gpucon.widgets.fmt import oldest_wait as fmt_oldest_wait

    return fmt_oldest_wait(oldest_wait(q, snapshot.staleness))


def _gpu_and_node_lines(snapshot: Snapshot) -> list[str]:
    """GPU health (temperature, power/limit, utilisation, last XID, clocks held down) and
    Kubernetes nodes (MIG config, its state, cordon)."""
    from gpucon.widgets import health_text as ht

    lines: list[str] = []
    if snapshot.gpus:
        lines.append("")
        lines.append(
            f"{'GPU':<24} {'NAME':<22} {'TEMP':>5} {'POWER':>10} {'UTIL':>5}  {'XID':<10} CLOCKS"
        )
        for g in sorted(snapshot.gpus.values(), key=lambda g: (g.host, g.index)):
            flags = " ".join(ht.clock_flags(g)) or (
                "n/a" if g.thermal_slowdown is None and g.power_capped is None else "ok"
            )
            lines.append(
                f"{_col(ht.gpu_label(g), 24)} {_col(g.name or 'n/a', 22)} "
                f"{ht.temperature(g):>5} {ht.power(g):>10} {_num(g.util_pct, '%'):>5}  "
                f"{ht.xid(g, snapshot.taken_at):<10} {flags}"
            )
    if snapshot.nodes:
        lines.append("")
        lines.append(f"{'NODE':<28} {'MIG CONFIG':<20} {'MIG STATE':<14} SCHEDULING")
        for name in sorted(snapshot.nodes):
            n = snapshot.nodes[name]
            since = snapshot.mig_pending_since.get(name)
            unseen = name in snapshot.mig_pending_unseen
            state = ht.node_state(n, since, snapshot.taken_at, unseen)
            lines.append(
                f"{_col(name, 28)} {_col(n.mig_config or 'n/a', 20)} "
                f"{_col(state, 14)} {'CORDONED' if n.unschedulable else 'open'}"
            )
    return lines
