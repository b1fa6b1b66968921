"""The order alerts are shown in, and alerts grouped per target.

Order: worse first — every CRIT above every WARN, INFO last — because an on-call eye looks for
CRIT first, and a WARN listed above a CRIT pushes it down, off a short panel. Within a
severity the cause leads the symptoms it brings: a backend down, not ready, an XID, a failed
MIG reconfiguration or a stale source (``Cause.FAULT``) before memory running out, heat,
power, noisy co-tenants and a stream backing up (``Cause.RESOURCE``), and those before the
p95, queue-wait and hot-slot alerts (``Cause.SYMPTOM``); among those of one rank, the queue's
own past-SLO alert (what every user of the stream waits, the symptom the others share) before
any one backend's; then newest first (an alert dated by its source can be older than the
symptoms it brings: the queue past its SLO started before the p95s it pushes up). A cause of lower
severity than its symptom (a WARN ``queue growing`` behind a CRIT ``queue_slo``) is named in
the symptom's text (``model.alert_causes``), so the link survives the order.

Groups: one per target, led by its first alert in that order, with the others behind it, so a
panel can show one line per target ("sdxl-c0 backend down (+2)").
"""

from __future__ import annotations

from collections.abc import Iterable

import msgspec

from gpucon.model.alert_base import Alert, Cause, Severity

_CAUSE_RANK = {Cause.FAULT: 0, Cause.RESOURCE: 1, Cause.SYMPTOM: 2}
# symptoms every user of a stream shares, led before one backend's of the same rank
_SHARED_SYMPTOMS = frozenset(("queue_slo",))


def alert_order(alert: Alert) -> tuple[int, int, int, bool, float, str]:
    """The sort key of an alert: worse first (INFO last), then cause, shared, newest, key."""
    rank = _CAUSE_RANK[alert.cause or Cause.SYMPTOM]
    return (
        alert.severity is Severity.INFO,
        -alert.severity,
        rank,
        alert.rule not in _SHARED_SYMPTOMS,
        -alert.since,
        alert.key,
    )


def ordered(alerts: Iterable[Alert]) -> tuple[Alert, ...]:
    return tuple(sorted(alerts, key=alert_order))


class AlertGroup(msgspec.Struct, frozen=True, gc=False):
    """Every alert on one target, the leading one first."""

    target: str
    alerts: tuple[Alert, ...]

    @property
    def lead(self) -> Alert:
        """The alert the group is shown by: its worst (its cause among equals)."""
        return self.alerts[0]

    @property
    def severity(self) -> Severity:
        return max(a.severity for a in self.alerts)

    @property
    def count(self) -> int:
        return len(self.alerts)

    @property
    def others(self) -> tuple[Alert, ...]:
        return self.alerts[1:]

    def summary(self) -> str:
        """The lead's message, and how many more fire on the target and which rules:
        ``"backend down (+2: p95_slo, queue_wait)"``."""
        if not self.others:
            return self.lead.message
        rules = ", ".join(dict.fromkeys(a.rule for a in self.others))
        return f"{self.lead.message} (+{len(self.others)}: {rules})"


def group_alerts(alerts: Iterable[Alert]) -> tuple[AlertGroup, ...]:
    """One group per target, in the order of each group's lead (alerts ordered first)."""
    by_target: dict[str, list[Alert]] = {}
    for alert in ordered(alerts):
        by_target.setdefault(alert.target, []).append(alert)
    return tuple(AlertGroup(target, tuple(group)) for target, group in by_target.items())
