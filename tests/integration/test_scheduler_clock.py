"""A scheduler whose clock is 30 s behind Redis's (NTP broken on its host) is alive, not
silent: each heartbeat reads 30 s old as it is written, and the console said ``the scheduler's
heartbeat stopped 30s ago ... is the scheduler running?`` (CRIT with requests waiting), with
every INFL and REQ/S dimmed, while it served every request. Now the console ages the beats on
its own clock once it has seen one change, names the skew (``scheduler_clock``), and still
says the scheduler is silent within seconds of its death. A clock 30 s ahead (its beats dated
after Redis's time) is named the same way, as ahead.

Real components: the redis-server fixture, the reference scheduler (``gpucon scheduler``) as a
child process whose ``time.time`` runs 30 s behind, ``RedisQueueSource`` and the hub.
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from gpucon.hub import Hub
from gpucon.model.alert_base import Severity
from gpucon.model.scheduler_beat import SCHEDULER
from gpucon.model.snapshot import Snapshot
from gpucon.sources.redisq import RedisQueueSource

pytestmark = pytest.mark.integration

STREAM = "gen:queue"
BEHIND_S = 30.0

# the reference scheduler, its wall clock set back (asyncio's waits use the monotonic clock)
SKEWED_SCHEDULER = """
import sys, time
real = time.time
time.time = lambda: real() - float(sys.argv[1])
from gpucon.commands.cli import main
sys.exit(main(["scheduler", "--redis", sys.argv[2], "--stream", "gen:queue", "--group", "g1",
               "--consumer", "skewed"]))
"""


def rules(snap: Snapshot) -> dict[str, Severity]:
    return {a.rule: a.severity for a in snap.alerts}


@pytest.mark.parametrize("behind_s", [BEHIND_S, -BEHIND_S], ids=["behind", "ahead"])
def test_a_scheduler_behind_redis_is_alive_its_skew_named_and_its_death_seen(
    redis_url: str, tmp_path: Path, behind_s: float
) -> None:
    source = RedisQueueSource(redis_url, streams=(STREAM,), cadence_s=0.5, timeout_s=1.0)
    hub = Hub([source], refresh_s=0.5)
    log = (tmp_path / "scheduler.log").open("wb")
    scheduler = subprocess.Popen(
        [sys.executable, "-c", SKEWED_SCHEDULER, str(behind_s), redis_url],
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    try:
        deadline = time.monotonic() + 30.0
        snaps: list[Snapshot] = []
        while time.monotonic() < deadline:
            hub.poll_once()
            snaps.append(hub.tick())
            if len(snaps) >= 6 and "scheduler_clock" in rules(snaps[-1]):
                break
            time.sleep(0.5)
        last = snaps[-1]
        assert rules(last).get("scheduler_clock") is Severity.WARNING, last.alerts
        assert "scheduler_silent" not in rules(last), last.alerts
        assert SCHEDULER not in last.staleness.sources  # INFL and REQ/S not dimmed
        (skew,) = [a for a in last.alerts if a.rule == "scheduler_clock"]
        where = "behind" if behind_s > 0 else "ahead of"
        assert skew.message.startswith(f"the scheduler's clock is at least 25s {where} Redis's")
        measured = last.scheduler_behind_s
        assert measured is not None and 27.0 < measured * (behind_s / BEHIND_S) < 31.0

        scheduler.kill()
        scheduler.wait(timeout=10)
        died = time.monotonic()
        while "scheduler_silent" not in rules(snap := hub.tick()):
            assert time.monotonic() - died < 10.0, "the dead scheduler never went silent"
            time.sleep(0.5)
            hub.poll_once()
        # two of its 1 s periods and a read after its last beat, not 30 s more
        assert time.monotonic() - died < 6.0
        assert "scheduler_clock" not in rules(snap)  # the silence speaks, not the skew
    finally:
        if scheduler.poll() is None:
            scheduler.kill()
            scheduler.wait(timeout=10)
        log.close()
        source.close()
