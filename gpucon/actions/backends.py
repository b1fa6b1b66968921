"""What the backend actions share: reading their params, finding backends, describing state.

Parameters come from the command line or a key press; these helpers refuse what is wrong with
a BadParams that names the field, before any plan exists.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Mapping

from gpucon.actions.plan import BlastRadius
from gpucon.controls.base import Controls
from gpucon.errors import MAX_NAME_CHARS, MAX_TEXT_CHARS, BadParams, bounded_text, shown
from gpucon.model.fleet import Backend, BackendState
from gpucon.model.ids import escaped_name, parse_slot_id
from gpucon.model.snapshot import Snapshot


def text_param(params: Mapping[str, object], name: str, default: str | None = None) -> str | None:
    """A free-text param (a reason, a node's name): non-empty, at most MAX_TEXT_CHARS, and
    without control or format characters."""
    value = params.get(name, default)
    if value is None:
        return None
    if not isinstance(value, str) or not value.strip():
        raise BadParams(name, f"expected a non-empty text, got {shown(value)}")
    bounded_text(name, value, MAX_TEXT_CHARS)
    if any(unicodedata.category(c) in ("Cc", "Cf") for c in value):
        # C0, DEL, C1 and format characters (bidi overrides, zero-width): they would reach
        # the registry and every colleague's terminal
        raise BadParams(name, f"must not contain control or format characters, got {shown(value)}")
    return value.strip()


def find_backend(snapshot: Snapshot, name: object) -> Backend:
    """The backend ``name`` names: its registry name exactly (the console passes the selected
    row's real name, control characters and all), or the escaped form that listings and
    messages print (``b\\x1b[31m1``), so the operator is never locked out of a backend."""
    if name is None:
        raise BadParams("backend", "which backend? (give its name)")
    if not isinstance(name, str) or not name:
        raise BadParams("backend", f"expected a backend's name, got {shown(name)}")
    bounded_text("backend", name, MAX_NAME_CHARS)
    backend = snapshot.backends.get(name) or snapshot.backends.get(name.strip())
    if backend is None:
        backend = next(
            (b for b in snapshot.backends.values() if escaped_name(b.name) == name), None
        )
    if backend is None:
        known = ", ".join(escaped_name(n) for n in sorted(snapshot.backends)[:8]) or "none"
        raise BadParams("backend", f"unknown backend {shown(name)} (known: {known})")
    return backend


def backend_node(snapshot: Snapshot, backend: Backend) -> str | None:
    """The Kubernetes node a backend runs on: its pod's node, its slot's, or its slot's host.

    The host in the slot id is the last resort, for a drained backend whose pod was evicted
    (Kubernetes no longer places it anywhere, the registry still names its slot).
    """
    if backend.node:
        return backend.node
    slot = snapshot.slots.get(backend.slot_id or "")
    if slot is not None and slot.node:
        return slot.node
    if backend.slot_id:
        try:
            return parse_slot_id(backend.slot_id).host
        except ValueError:
            return None
    return None


def node_backends(snapshot: Snapshot, node: str) -> tuple[Backend, ...]:
    """The backends on Kubernetes node ``node`` (see ``backend_node``), by name."""
    found = [b for b in snapshot.backends.values() if backend_node(snapshot, b) == node]
    return tuple(sorted(found, key=lambda b: b.name))


def capacity_share(snapshot: Snapshot, names: tuple[str, ...]) -> tuple[float | None, str]:
    """Share (percent) of the serving capacity, by weight of the active backends, that the
    active ones among ``names`` carry; or None and why no share can be given, worded for the
    plan's blast radius. The one measure every plan's blast radius gives."""
    active = [b for b in snapshot.backends.values() if b.state is BackendState.ACTIVE]
    unknown = sorted(b.name for b in active if b.weight is None)
    if unknown:
        return None, (
            f"share of fleet capacity unknown: the weight of {escaped_name(unknown[0])}"
            + (f" (+{len(unknown) - 1})" if len(unknown) > 1 else "")
            + " is not readable"
        )
    total = sum(b.weight or 0.0 for b in active)
    if total <= 0:
        return None, "no share of fleet capacity: no active backend has a weight above 0"
    part = sum(b.weight or 0.0 for b in active if b.name in names)
    return 100.0 * part / total, ""


def capacity_share_pct(snapshot: Snapshot, names: tuple[str, ...]) -> float | None:
    """``capacity_share``'s percent alone."""
    return capacity_share(snapshot, names)[0]


def capacity_radius(
    snapshot: Snapshot, names: tuple[str, ...], slots: tuple[str, ...], effect: str
) -> BlastRadius:
    """The blast radius of a plan on ``names``: their share of capacity and what happens to it."""
    pct, why = capacity_share(snapshot, names)
    return BlastRadius(names, slots, pct, effect, why)


def describe_state(controls: Controls, names: list[str], *, nothing_written: bool = False) -> str:
    """Each backend's state in the registry now, for an outcome's state line. A read that fails
    says why in the registry's words (``Redis at HOST:PORT did not answer in 2s``) and the
    backends not read after it are left unread (each would wait as long); ``nothing_written``:
    the run wrote nothing, which such a line then says (the state it cannot show is as it was)."""
    parts = []
    for i, name in enumerate(names):
        try:
            rec = controls.registry.backend(name)
        except Exception as exc:
            why = controls.registry.why_unread(exc)
            said = "; nothing was written" if nothing_written else ""
            parts.append(f"{', '.join(names[i:])}: {why}: state unknown{said}")
            break
        if rec is None:
            parts.append(f"{name}: not in the registry")
        else:
            parts.append(
                f"{name}: state={rec.state} weight={rec.weight} inflight={rec.inflight} "
                f"owner={rec.owner} reason={rec.reason}"
            )
    return "; ".join(parts)
