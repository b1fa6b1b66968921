"""A plan made on stale data says so, above the checks that read it.

A plan's checks read the snapshot: the registry's states and weights (Redis), the rates and
p95s (Prometheus), the slots' memory. When a source is stale (its newest read failed, or its
last good read is older than two cadences), a check can PASS on that source's last word: "lab-b0
is active" from a Redis that stopped answering 15 s ago. The plan then carries one WARN line per
stale source, first, with its age and error, so the operator reads the PASS lines below for what
they are. The guard still checks the preconditions again on a fresh read before changing
anything (and refuses when it cannot read); a probe changes no state and is not checked again.
Pure: reads the snapshot's staleness and source status only.
"""

from __future__ import annotations

from dataclasses import replace

from gpucon.actions.plan import Plan, Precondition
from gpucon.model.alert_base import fmt_elapsed
from gpucon.model.fleet import Health
from gpucon.model.scheduler_beat import SCHEDULER
from gpucon.model.snapshot import Snapshot

ERROR_CHARS = 80  # of a source's error in the line: the alert and the status bar say the rest


def stale_inputs(snapshot: Snapshot, rechecked: bool) -> list[Precondition]:
    """One WARN line per stale source of ``snapshot`` (none when every source is current)."""
    stale = dict(snapshot.staleness.sources)
    for name, status in snapshot.sources.items():
        # a source that failed its every read so far has no age: it is no less stale
        if status.health is Health.DOWN and name not in stale:
            stale[name] = -1.0
    lines = []
    for name in sorted(stale):
        age = stale[name]
        when = "never read" if age < 0 else f"last good read {fmt_elapsed(age)} ago"
        if name == SCHEDULER:  # Redis answers; the scheduler that keeps the counts does not
            when = f"its heartbeat is {fmt_elapsed(age)} old: in-flight counts are not kept"
        known = snapshot.sources.get(name)
        error = f": {known.error[:ERROR_CHARS]}" if known is not None and known.error else ""
        after = (
            "applying reads the state again first"
            if rechecked
            else "nothing re-reads it before this runs"
        )
        lines.append(
            Precondition(
                f"stale:{name}",
                True,
                f"{name} not current ({when}{error}); the checks below use its last values, "
                f"{after}",
                warning=True,
            )
        )
    return lines


def with_stale_inputs(plan: Plan, snapshot: Snapshot, rechecked: bool) -> Plan:
    """``plan`` with the stale sources' WARN lines ahead of its own preconditions."""
    lines = stale_inputs(snapshot, rechecked)
    if not lines:
        return plan
    return replace(plan, preconditions=(*lines, *plan.preconditions))
