"""The fleet table's rows of a lab-like fleet against real servers: backends that only the
registry (a real redis-server) names, on slots no GPU source describes, whose readiness the
real ReadinessSource checks over HTTP (a closed port: refused).

With Redis killed, the registry's last state is stale but the readiness check is fresh: a
backend that should take work shows NOT READY (not the stale ``active``), a drained one that
is dead shows ``drained ✗``; the registry part (WT, INFL) keeps its stale mark. The host comes
from the slot id, and the status bar counts the slots the table shows.
"""

from __future__ import annotations

import socket
from pathlib import Path

import pytest
import redis

from gpucon.hub import Hub
from gpucon.model.ids import known_slot_count
from gpucon.model.snapshot import Snapshot
from gpucon.sources.base import Source
from gpucon.sources.readiness import ReadinessSource
from gpucon.sources.redisq import RedisQueueSource
from gpucon.widgets.row_builder import build_rows
from gpucon.widgets.slot_cells import cell
from tests.helpers.latest_snapshot import Latest
from tests.helpers.servers import RedisProcess

pytestmark = pytest.mark.integration

CADENCE_S = 0.5


def closed_port() -> int:
    """A loopback port nothing listens on (bound, then released): a check there is refused."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def refused(snap: Snapshot, name: str) -> bool:
    lv = snap.liveness.get(name)
    return lv is not None and lv.serving is False and lv.http_fresh


def test_lab_rows_with_redis_down_say_not_ready_host_and_slot_count(tmp_path: Path) -> None:
    url = f"http://127.0.0.1:{closed_port()}"
    with RedisProcess(tmp_path) as server:
        r = redis.Redis.from_url(server.url)
        r.xgroup_create("gen:queue", "g1", id="$", mkstream=True)
        for name, slot, state in (("lab-b0", "lab/gpu0/gi1", "active"),
                                  ("lab-b1", "lab/gpu0/gi2", "drained")):  # fmt: skip
            r.sadd("gpucon:backends", name)
            r.hset(f"gpucon:backend:{name}",
                   mapping={"slot": slot, "state": state, "weight": "1", "inflight": "0",
                            "url": url})  # fmt: skip
        r.close()
        sources: list[Source] = [
            RedisQueueSource(
                server.url, streams=("gen:queue",), group="g1", cadence_s=CADENCE_S, timeout_s=0.5
            ),
            ReadinessSource(cadence_s=CADENCE_S, timeout_s=0.5),
        ]
        hub = Hub(sources, refresh_s=0.1)
        latest = Latest()
        hub.start(latest)
        try:
            both = ("lab-b0", "lab-b1")
            latest.wait(lambda s: all(refused(s, n) for n in both), 15.0, "with both refused")
            server.kill()
            snap = latest.wait(
                lambda s: (
                    s.value_age("backend:lab-b0", "state") is not None
                    and s.value_age("backend:lab-b1", "state") is not None
                    and all(refused(s, n) for n in both)
                ),
                15.0,
                "with the registry stale and the checks still fresh",
            )
        finally:
            hub.stop()
    assert snap.backends["lab-b0"].state.value == "active"  # the registry's last word, kept
    rows = build_rows(snap, 2500.0)
    dead = rows[("lab/gpu0/gi1", "lab-b0")]
    assert cell("state", dead, 9, "") == ("NOT READY", "breach")  # not the stale "active"
    assert cell("weight", dead, 4, "")[1] == "stale"  # the registry part is marked stale
    assert cell("inflight", dead, 6, "")[1] == "stale"
    drained = rows[("lab/gpu0/gi2", "lab-b1")]
    assert cell("state", drained, 9, "")[0] == "drained ✗"  # not a healthy drained one
    # no source describes the slots: host, GPU and slot come from the ids
    assert cell("host", dead, 8, "") == ("lab", "")
    assert (dead.gpu, dead.slot) == ("0", "gi1")
    assert cell("gpu_slot", drained, 8, "")[0] == "0/gi2"
    # the status bar counts the slots the table has rows for
    assert not snap.slots
    assert known_slot_count(snap.slots, (b.slot_id for b in snap.backends.values())) == 2
