"""A symptom alert names its likely cause, so that ordering by severity loses no link.

Alerts are shown worst first (``model.alert_order``): an on-call eye looks for CRIT first, and a
WARN cause listed above the CRIT it brings (``queue growing`` above ``queue_slo``) pushed the
CRIT down, off a short panel. The causal link the old cause-first order showed is kept in the
symptom's own text instead: ``oldest request waited 9.6 s, past every p95 SLO (largest 2500
ms), 3844 waiting (likely cause: queue growing on gen:queue); a server's p95 starts ...``.
Only causes that fire now are named, one per symptom, the most specific first:

- a stream's ``queue_slo`` / ``queue_wait``: a silent scheduler (``scheduler_silent``), the
  stream's ``queue_stalled`` (nobody reads it), else its ``queue_growth``, else
  ``no_backends``;
- a backend's ``p95_slo`` / ``p95_trend`` / ``queue_wait``: another backend of its model not
  serving (``not_ready``, its traffic moved here), else a co-tenant on its slot
  (``noisy_neighbour``), else heat or the power cap on its GPU, else a growing queue.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import msgspec

from gpucon.model.alert_base import Alert, Severity
from gpucon.model.fleet import Backend

_STREAM_SYMPTOMS = frozenset(("queue_slo", "queue_wait"))
_BACKEND_SYMPTOMS = frozenset(("p95_slo", "p95_trend", "queue_wait"))


def _gpu_of(slot_id: str) -> str:
    """``host/gpuN`` of a MIG or whole-GPU slot id (how GPU alerts name their target)."""
    parts = slot_id.split("/")
    return "/".join(parts[:2]) if len(parts) >= 2 else slot_id


def _stream_cause(stream: str, by_rule: Mapping[str, list[Alert]]) -> str | None:
    if by_rule.get("scheduler_silent"):  # said within seconds; queue_stalled after 20 s
        return "the scheduler is silent"
    for rule, says in (
        ("queue_stalled", "nobody reads {}"),
        ("queue_growth", "queue growing on {}"),
    ):
        if any(a.target == stream for a in by_rule.get(rule, ())):
            return says.format(stream)
    if by_rule.get("no_backends"):
        return "no backend in the registry"
    return None


def _backend_cause(
    backend: Backend, by_rule: Mapping[str, list[Alert]], down_by_model: Mapping[str, list[str]]
) -> str | None:
    others = [n for n in down_by_model.get(backend.model or "", ()) if n != backend.name]
    if others:  # its model's traffic came here
        more = f" (+{len(others) - 1})" if len(others) > 1 else ""
        return f"{others[0]}{more} not serving {backend.model}"
    slot = backend.slot_id or ""
    for alert in by_rule.get("noisy_neighbour", ()):
        if alert.target == slot:
            return f"a co-tenant on {slot}"
    gpu = _gpu_of(slot)
    for rule, says in (("thermal", "heat"), ("power_limit", "the power cap")):
        if any(a.target == gpu for a in by_rule.get(rule, ())):
            return f"{says} on {gpu}"
    growing = by_rule.get("queue_growth", ())
    if growing:
        return f"queue growing on {growing[0].target}"
    return None


def _with_cause(message: str, cause: str) -> str:
    """The cause after what the symptom says and before its explanation (``; ...``), so a
    panel that cuts a long message at its edge cuts the explanation, not the cause."""
    said, sep, explained = message.partition("; ")
    return f"{said} (likely cause: {cause}){sep}{explained}"


def with_likely_causes(alerts: Sequence[Alert], backends: Mapping[str, Backend]) -> list[Alert]:
    """``alerts`` with each symptom's likely cause added to its message (when one fires)."""
    by_rule: dict[str, list[Alert]] = {}
    for alert in alerts:
        by_rule.setdefault(alert.rule, []).append(alert)
    if not any(r in by_rule for r in _STREAM_SYMPTOMS | _BACKEND_SYMPTOMS):
        return list(alerts)
    down_by_model: dict[str, list[str]] = {}
    for alert in by_rule.get("not_ready", ()):
        b = backends.get(alert.target)
        if alert.severity is Severity.CRITICAL and b is not None and b.model:
            down_by_model.setdefault(b.model, []).append(b.name)
    out = []
    for alert in alerts:
        cause = None
        backend = backends.get(alert.target)
        if alert.rule in _STREAM_SYMPTOMS and backend is None:
            cause = _stream_cause(alert.target, by_rule)
        elif alert.rule in _BACKEND_SYMPTOMS and backend is not None:
            cause = _backend_cause(backend, by_rule, down_by_model)
        if cause is not None:
            alert = msgspec.structs.replace(alert, message=_with_cause(alert.message, cause))
        out.append(alert)
    return out
