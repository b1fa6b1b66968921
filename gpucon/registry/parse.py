"""The one reading of a backend hash: ``parse_backend(name, fields) -> (Backend, problems)``.

The console's source, the CLI's planning snapshot, the controls and the reference scheduler
all turn registry hashes into ``Backend`` values here, so they cannot disagree about a hash.
What the registry holds is never trusted: a field that does not hold what the contract says
becomes ``None`` (a state becomes ``down``) and a problem names the key and the field; nothing
raises. Chosen meanings:

- no ``state`` field, or a state gpucon does not know: ``down`` (a scheduler that honours the
  contract sends work only to ``active`` backends, so it is out of service), with a problem;
- ``weight`` must be a finite number >= 0: ``-3``, ``nan``, ``inf`` or ``x`` read as ``None``;
- ``inflight`` an integer >= 0; ``ready`` ``1``/``0`` (or true/false); ``ready_at`` and
  ``ready_since`` epoch seconds (finite, >= 0); ``slot`` a slot id (``host/gpuN``,
  ``host/gpuN/giM``, ``vm:NAME``).
- a backend named in ``gpucon:backends`` whose hash is empty or gone reads as ``down``.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping

import msgspec

from gpucon.model.fleet import Backend, BackendState
from gpucon.model.ids import parse_slot_id
from gpucon.registry import keys

TRUE_WORDS = frozenset({"1", "true", "yes", "ready"})
FALSE_WORDS = frozenset({"0", "false", "no", "not-ready"})
STATE_WORDS = "active, draining, drained or down"


class BackendRecord(msgspec.Struct, frozen=True, gc=False):
    """A backend as a write sees it: the parsed Backend plus what only writers use."""

    backend: Backend
    # the weight a drain remembered, restored by undrain
    weight_before_drain: float | None = None

    @property
    def name(self) -> str:
        return self.backend.name

    @property
    def state(self) -> BackendState:
        return self.backend.state

    @property
    def slot_id(self) -> str | None:
        return self.backend.slot_id

    @property
    def weight(self) -> float | None:
        return self.backend.weight

    @property
    def inflight(self) -> int | None:
        return self.backend.inflight

    @property
    def owner(self) -> str | None:
        return self.backend.owner

    @property
    def reason(self) -> str | None:
        return self.backend.reason


class _Fields:
    """One hash being read; collects the problems that name its key."""

    def __init__(self, name: str, fields: Mapping[str, str]) -> None:
        self.key = keys.backend_key(name)
        self.fields = fields
        self.problems: list[str] = []

    def bad(self, field: str, expected: str) -> None:
        got = self.fields[field]
        self.problems.append(f"{self.key} field {field}: expected {expected}, got {got!r:.40}")

    def text(self, field: str) -> str | None:
        return self.fields.get(field) or None

    def number(self, field: str, expected: str = "a number >= 0") -> float | None:
        if field not in self.fields:
            return None
        try:
            value = float(self.fields[field])
        except ValueError:
            value = math.nan
        if not math.isfinite(value) or value < 0:
            self.bad(field, expected)
            return None
        return value

    def count(self, field: str) -> int | None:
        if field not in self.fields:
            return None
        try:
            value = int(self.fields[field])
        except ValueError:
            value = -1
        if value < 0:
            self.bad(field, "an integer >= 0")
            return None
        return value

    def flag(self, field: str) -> bool | None:
        if field not in self.fields:
            return None
        word = self.fields[field].strip().lower()
        if word in TRUE_WORDS or word in FALSE_WORDS:
            return word in TRUE_WORDS
        self.bad(field, "1/true or 0/false")
        return None

    def state(self) -> BackendState:
        if "state" not in self.fields:
            self.problems.append(f"{self.key}: no state field (read as down)")
            return BackendState.DOWN
        try:
            return BackendState(self.fields["state"])
        except ValueError:
            self.bad("state", STATE_WORDS)
            return BackendState.DOWN

    def slot(self) -> str | None:
        slot_id = self.text("slot")
        if slot_id is None:
            return None
        try:
            parse_slot_id(slot_id)
        except ValueError:
            self.bad("slot", "a slot id (host/gpuN, host/gpuN/giM or vm:NAME)")
            return None
        return slot_id


def parse_backend(name: str, fields: Mapping[str, str]) -> tuple[Backend, tuple[str, ...]]:
    """The Backend a registry hash describes, and what was wrong with it (empty when nothing)."""
    if not fields:
        missing = f"{keys.backend_key(name)}: missing (named in {keys.BACKENDS})"
        return Backend(name=name, state=BackendState.DOWN), (missing,)
    f = _Fields(name, fields)
    backend = Backend(
        name=name,
        slot_id=f.slot(),
        url=f.text("url"),
        model=f.text("model"),
        weight=f.number("weight"),
        state=f.state(),
        inflight=f.count("inflight"),
        ready=f.flag("ready"),
        ready_at=f.number("ready_at", "epoch seconds"),
        ready_since=f.number("ready_since", "epoch seconds"),
        owner=f.text("owner"),
        reason=f.text("reason"),
        pod=f.text("pod"),
        node=f.text("node"),
        changed_at=f.number("changed_at", "epoch seconds"),
    )
    return backend, tuple(f.problems)


def parse_record(name: str, fields: Mapping[str, str]) -> tuple[BackendRecord, tuple[str, ...]]:
    """``parse_backend`` plus the fields only writers use (the weight a drain remembered)."""
    backend, problems = parse_backend(name, fields)
    f = _Fields(name, fields)
    before = f.number("weight_before_drain")
    return BackendRecord(backend, before), problems + tuple(f.problems)


def ready_text(
    verdicts: Mapping[str, tuple[bool, float]], since: Mapping[str, float] | None = None
) -> str:
    """What a health checker writes to ``gpucon:ready``: JSON ``{name: [1|0, epoch seconds]}``
    (its verdict on each backend and when it checked), with a third element where ``since``
    knows it: when that backend's verdict last changed (``[0, checked, since]``)."""
    dated = since or {}
    body: dict[str, list[float]] = {}
    for name, (ok, at) in verdicts.items():
        entry = [1 if ok else 0, round(at, 3)]
        changed = dated.get(name)
        if changed is not None:
            entry.append(round(changed, 3))
        body[name] = entry
    return json.dumps(body, separators=(",", ":"))


# the ``gpucon:ready`` entry's elements as the backend's live hash fields, in order
READY_FIELDS = ("ready", "ready_at", "ready_since")


def parse_ready(raw: str | None) -> tuple[dict[str, tuple[str, ...]], tuple[str, ...]]:
    """``gpucon:ready`` as name -> (``ready``, ``ready_at``[, ``ready_since``]) field texts
    for ``parse_backend`` to check, and what was wrong with the document itself. A document
    without the third element (an older scheduler) reads as before."""
    if raw is None:
        return {}, ()
    try:
        body = json.loads(raw)
    except ValueError:
        body = None
    if not isinstance(body, dict):
        return {}, (f"{keys.READY}: expected a JSON object, got {raw!r:.40}",)
    out: dict[str, tuple[str, ...]] = {}
    problems: list[str] = []
    for name, entry in body.items():
        if isinstance(entry, list) and len(entry) in (2, 3):
            out[str(name)] = tuple(str(e) for e in entry)
        else:
            problems.append(
                f"{keys.READY} {name!r:.40}: expected [1|0, epoch seconds, epoch seconds?]"
            )
    return out, tuple(problems)
