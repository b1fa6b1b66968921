"""A Snapshot of the scheduler registry alone, read in one pipeline: what the CLI verbs plan on.

The console plans on the hub's merged snapshot; the command line has no hub, so it reads the
registry's backends (state, weight, inflight, owner, reason, slot) and the registry version
together in one MULTI (so the version matches what was read). Read-only: GET, SMEMBERS, HGETALL.
"""

from __future__ import annotations

import time
from typing import Any

from gpucon.model.fleet import Backend, BackendState
from gpucon.model.snapshot import Snapshot

BACKENDS_KEY = "gpucon:backends"
VERSION_KEY = "gpucon:registry:version"


def _state(raw: str | None) -> BackendState:
    try:
        return BackendState(raw or "active")
    except ValueError:
        return BackendState.DOWN


def _number(raw: str | None) -> float | None:
    try:
        return None if raw in (None, "") else float(str(raw))
    except ValueError:
        return None


def backend_from_hash(name: str, raw: dict[str, str]) -> Backend:
    inflight = _number(raw.get("inflight"))
    return Backend(
        name=name,
        slot_id=raw.get("slot") or None,
        url=raw.get("url") or None,
        model=raw.get("model") or None,
        weight=_number(raw.get("weight")),
        state=_state(raw.get("state")),
        inflight=None if inflight is None else int(inflight),
        owner=raw.get("owner") or None,
        reason=raw.get("reason") or None,
        pod=raw.get("pod") or None,
        node=raw.get("node") or None,
    )


def read_registry(client: Any) -> tuple[Snapshot, int]:
    """The registry's backends as a Snapshot, and the registry version they were read at.

    ``client`` is a redis-py client with ``decode_responses=True``.
    """
    names = sorted(client.smembers(BACKENDS_KEY))
    with client.pipeline(transaction=True) as pipe:
        pipe.get(VERSION_KEY)
        for name in names:
            pipe.hgetall(f"gpucon:backend:{name}")
        replies = pipe.execute()
    version = int(replies[0] or 0)
    backends = {
        name: backend_from_hash(name, raw)
        for name, raw in zip(names, replies[1:], strict=True)
        if raw
    }
    return Snapshot(taken_at=time.time(), backends=backends), version
