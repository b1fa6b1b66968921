"""Every Redis key name of the scheduler registry, and nothing else.

The console, the CLI, the controls and the reference scheduler agree on these names by
importing them from here. Backend hashes hold what changes when someone acts (state, weight,
owner, reason, slot, url, model); what changes on every request or health check lives in
one shared hash (``INFLIGHT``) and one document (``READY``), so that a reader fetches it with
two commands per tick instead of one per backend.
"""

from __future__ import annotations

BACKEND_PREFIX = "gpucon:backend:"
# set: names of registered backends
BACKENDS = "gpucon:backends"
# counter: bumped by every write to a backend hash or to BACKENDS, in the same MULTI
VERSION = "gpucon:registry:version"
# stream: one entry per action event, capped
AUDIT = "gpucon:audit"
AUDIT_MAXLEN = 10_000
# hash: backend name -> requests assigned and not yet released (kept by the scheduler)
INFLIGHT = "gpucon:inflight"
# string: JSON {name: [1|0, epoch seconds]}: the scheduler's last health round, written whole
READY = "gpucon:ready"
# hash: scheduler (consumer) name -> JSON {"at": epoch seconds, "every_s": seconds}: each
# scheduler's heartbeat, written at least every ``every_s`` (registry/heartbeat.py)
SCHEDULERS = "gpucon:schedulers"
# the reference scheduler's answers: a stream of outcomes and one list per request
RESULTS_STREAM = "gen:results"


def backend_key(name: str) -> str:
    """The hash of one backend."""
    return f"{BACKEND_PREFIX}{name}"


def lock_key(target: str) -> str:
    """An action's per-target lock (``SET NX PX``; the value names its holder)."""
    return f"gpucon:lock:{target}"


def assigned_key(name: str) -> str:
    """Hash of stream entry id -> assignment time of the entries a backend holds now."""
    return f"gpucon:assigned:{name}"


def reply_key(entry_id: str) -> str:
    """The list a request's answer is pushed to."""
    return f"gen:reply:{entry_id}"
