"""A Snapshot of the scheduler registry alone: what the CLI verbs plan on.

The console plans on the hub's merged snapshot; the command line has no hub, so it reads the
registry once through ``gpucon.registry.read`` (the same reader and parser as the console's
source: both see the same fleet). The version is read before the hashes, so a write in between
makes a plan look stale (refused, safe) rather than fresh. Reads only; no transaction.
"""

from __future__ import annotations

import time
from typing import Any

from gpucon.model.snapshot import Snapshot
from gpucon.registry.read import read_once


def read_registry(client: Any) -> tuple[Snapshot, int]:
    """The registry's backends as a Snapshot, and the registry version they were read at.

    ``client`` is a redis-py client (either ``decode_responses``).
    """
    read = read_once(client)
    backends = {b.name: b for b in read.backends}
    return Snapshot(taken_at=time.time(), backends=backends), read.version
