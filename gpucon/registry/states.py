"""The backend state machine: which state may move to which, and what each move writes.

Written once as a table (h11 style) and as pure functions over a ``BackendRecord``; the
Redis registry applies a ``Change`` inside its WATCH/MULTI, the simulated registry under its
lock, so both registries run the same machine. ``down`` is set by whoever sees a backend
fail, never by gpucon; gpucon moves backends between ``active``, ``draining`` and ``drained``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

import msgspec

from gpucon.errors import BadParams, KeepsNoneServing, StateMoved
from gpucon.model.fleet import BackendState
from gpucon.registry.parse import BackendRecord

ACTIVE, DRAINING, DRAINED, DOWN = (
    BackendState.ACTIVE,
    BackendState.DRAINING,
    BackendState.DRAINED,
    BackendState.DOWN,
)

# state -> the states a registry write may move it to. draining -> draining is a drain run
# again after one timed out; drained -> draining is refused (it is drained already).
TRANSITIONS: Mapping[BackendState, frozenset[BackendState]] = {
    ACTIVE: frozenset({DRAINING}),
    DRAINING: frozenset({DRAINING, DRAINED, ACTIVE}),
    DRAINED: frozenset({ACTIVE}),
    DOWN: frozenset({DRAINING}),
}
# the states gpucon writes
SETTABLE = frozenset(s for targets in TRANSITIONS.values() for s in targets)


def sources_of(new: BackendState) -> frozenset[BackendState]:
    """The states a backend may be in for a write to move it to ``new``."""
    return frozenset(s for s, targets in TRANSITIONS.items() if new in targets)


def check_transition(name: str, current: BackendState | str, new: BackendState | str) -> None:
    """StateMoved unless ``current -> new`` is a move the registry may write (compare-and-set:
    the caller read ``current`` inside the write's transaction)."""
    try:
        target = BackendState(new)
    except ValueError:
        target = None
    if target is None or target not in SETTABLE:
        raise BadParams("state", f"{str(new)!r} is not a state gpucon sets")
    try:
        now = BackendState(current)
    except ValueError:
        now = DOWN  # the parser's reading of a state it does not know
    if target not in TRANSITIONS[now]:
        raise StateMoved(name, str(current), str(target), frozenset(map(str, sources_of(target))))


class Change(msgspec.Struct, frozen=True, gc=False):
    """What one transition writes to a backend, and the weight the caller is told about.

    ``weight``/``weight_before_drain``: None leaves the field as it is, except that
    ``forget_weight_before_drain`` removes the remembered weight.
    """

    name: str
    state: BackendState
    owner: str
    reason: str
    changed_at: float
    weight: float | None = None
    weight_before_drain: float | None = None
    forget_weight_before_drain: bool = False
    result: float | None = None
    slot: str | None = None  # a new slot id (a re-slice moves a drained backend)

    def hash_fields(self) -> dict[str, str]:
        """The backend hash fields to HSET."""
        fields = {
            "state": self.state.value,
            "owner": self.owner,
            "reason": self.reason,
            "changed_at": repr(self.changed_at),
        }
        if self.weight is not None:  # a drained weight reads "0", as schedulers have always seen it
            fields["weight"] = "0" if self.weight == 0 else repr(self.weight)
        if self.weight_before_drain is not None:
            fields["weight_before_drain"] = repr(self.weight_before_drain)
        if self.slot is not None:
            fields["slot"] = self.slot
        return fields

    def deleted_fields(self) -> tuple[str, ...]:
        """The backend hash fields to HDEL."""
        return ("weight_before_drain",) if self.forget_weight_before_drain else ()


def begin_drain(record: BackendRecord, owner: str, reason: str, now: float) -> Change:
    """``draining`` and weight 0, remembering the weight it had (kept across a drain run again
    after a timeout, so the second run does not remember 0)."""
    check_transition(record.name, record.state, DRAINING)
    before = record.weight_before_drain
    if record.state is not DRAINING or before is None:
        before = record.weight
    return Change(
        record.name,
        DRAINING,
        owner,
        reason,
        now,
        weight=0.0,
        weight_before_drain=before,
        result=before,
    )


def serves(record: BackendRecord | None) -> bool:
    """Whether a registry record takes work: active with a weight above 0."""
    return record is not None and record.state is ACTIVE and (record.weight or 0.0) > 0


GONE_NAMED_AT_MOST = 8  # out-of-service backends a refusal names one by one (the rest counted)


def check_keeps_serving(
    name: str, others: Sequence[str], read: Callable[[str], BackendRecord | None]
) -> None:
    """KeepsNoneServing unless one of ``others`` (the backends a drain plan counted on to keep
    serving ``name``'s model) is still active with a weight above 0: two drains planned at once,
    each counting on the other's backend, would otherwise both go ahead and leave the model with
    nothing serving it. ``read`` reads one of them in the drain's own transaction (the Redis
    registry WATCHes it first); they are read in order and the first that serves ends the
    check, so every one the plan counted on is covered and a healthy fleet costs one read."""
    gone = []
    for other in others:
        record = read(other)
        if serves(record):
            return
        if record is None:
            gone.append(f"{other} is no longer in the registry")
            continue
        who = f" (set by {record.owner})" if record.owner else ""
        weight = "n/a" if record.weight is None else f"{record.weight:g}"
        gone.append(f"{other} is {record.state} with weight {weight}{who}")
    if not gone:
        return
    named = sorted(gone)[:GONE_NAMED_AT_MOST]
    if len(gone) > len(named):
        named.append(f"and {len(gone) - len(named)} more out of service")
    raise KeepsNoneServing(name, "; ".join(named))


def mark_state(
    record: BackendRecord, state: BackendState | str, owner: str, reason: str, now: float
) -> Change:
    """Any allowed move that changes only the state (drain's last step: ``drained``)."""
    check_transition(record.name, record.state, state)
    return Change(record.name, BackendState(state), owner, reason, now)


def move_slot(record: BackendRecord, slot: str, owner: str, reason: str, now: float) -> Change:
    """A drained backend registered on another slot (a re-slice); its state stays ``drained``.
    A backend that takes work is never moved: the scheduler would send it requests meanwhile."""
    if record.state is not DRAINED:
        raise StateMoved(record.name, str(record.state), "drained", frozenset({"drained"}))
    return Change(record.name, DRAINED, owner, reason, now, slot=slot)


def undrain(
    record: BackendRecord, owner: str, reason: str, now: float, default_weight: float
) -> Change:
    """``active`` with the weight remembered at the drain (``default_weight`` when none)."""
    check_transition(record.name, record.state, ACTIVE)
    weight = record.weight_before_drain
    if weight is None:
        weight = float(default_weight)
    return Change(
        record.name,
        ACTIVE,
        owner,
        reason,
        now,
        weight=weight,
        forget_weight_before_drain=True,
        result=weight,
    )
