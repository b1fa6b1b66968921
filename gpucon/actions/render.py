"""Plans and outcomes as plain lines of text, for the command line (the screens style their own).

Plain text: the CLI passes every line through its control-character filter before printing.
"""

from __future__ import annotations

from gpucon.actions.plan import Outcome, Plan, Tier

TIER_NAMES = {
    Tier.REVERSIBLE: "tier 1 · reversible",
    Tier.DISRUPTIVE: "tier 2 · disruptive",
    Tier.DESTRUCTIVE: "tier 3 · destructive",
}


# lower case for a pass, so a WARN or a FAIL stands out in a column of them
_VERDICTS = {"PASS": "pass", "WARN": "WARN", "FAIL": "FAIL"}


def plan_lines(plan: Plan) -> list[str]:
    lines = [
        f"{plan.action} {plan.target}  ({TIER_NAMES[plan.tier]})  plan {plan.digest}",
    ]
    if plan.summary:
        lines.append(f"  {plan.summary}")
    for change in plan.changes:
        lines.append(f"    {change}")
    lines.append("preconditions:")
    for p in plan.preconditions:
        lines.append(f"  [{_VERDICTS[p.verdict]}] {p.name}: {p.text}")
    lines.append("steps:")
    for i, s in enumerate(plan.steps, 1):
        lines.append(f"  {i}. {s.text}")
    lines.append(f"blast radius: {plan.blast_radius.describe()}")
    if plan.blast_radius.backends:
        lines.append(f"  backends: {', '.join(plan.blast_radius.backends)}")
    if plan.blast_radius.slots:
        lines.append(f"  slots: {', '.join(plan.blast_radius.slots)}")
    lines.append(f"undo: {plan.undo}")
    if plan.ok and plan.warnings:
        lines.append(f"WARNING: {len(plan.warnings)} precondition(s) hold with a risk; read them")
    return lines


def outcome_lines(outcome: Outcome) -> list[str]:
    lines = [f"{outcome.status}: {outcome.message}"]
    for s in outcome.steps:
        lines.append(f"  [{'ok' if s.ok else 'FAILED'}] {s.step}: {s.text} ({s.duration_s:.1f} s)")
    if outcome.state_left:
        lines.append(f"state: {outcome.state_left}")
    return lines
