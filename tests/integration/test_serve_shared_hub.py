"""``gpucon serve`` reads the fleet once, whatever the number of viewers.

Real components: a redis-server (the fixture), the server's shared hub recording to its file
(``SharedWall``), and two viewers following it (``FollowFeed``, what each browser's console
runs on). Over the same seconds, Redis serves one reader: one ``gpucon`` client connection,
and as many stream reads as one hub makes; both viewers still see the queue change. Without
the shared hub each viewer was its own reader (two connections, twice the reads).
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import pytest
import redis

from gpucon.commands.serve_hub import SharedWall
from gpucon.model.fleet import Health
from gpucon.model.snapshot import Snapshot
from gpucon.recording.follow import FollowFeed, silent_snapshot
from gpucon.recording.store import RecordingStore
from tests.helpers.latest_snapshot import Snapshots

pytestmark = pytest.mark.integration

STREAM = "gen:queue"


def waiting(snapshot: Snapshot) -> int | None:
    q = snapshot.queues.get(STREAM)
    return None if q is None or q.lag is None else q.lag


def gpucon_clients(r: redis.Redis) -> list[str]:
    return [c["name"] for c in r.client_list() if c["name"].startswith("gpucon")]


def test_two_viewers_cause_one_set_of_reads(redis_url: str, tmp_path: Path) -> None:
    r = redis.Redis.from_url(redis_url, decode_responses=True)
    r.xgroup_create(STREAM, "g1", id="$", mkstream=True)
    config = tmp_path / "config.toml"
    config.write_text(
        f'[fleets.wall.redis]\nurl = "{redis_url}"\nstreams = ["{STREAM}"]\ncadence_s = 0.5\n'
    )
    args = argparse.Namespace(config=str(config), fleet=None, demo=False, refresh=0.25)
    with SharedWall(args) as wall:
        viewers = [Snapshots(), Snapshots()]
        feeds = []
        # the first frame is written: viewers open on it, as a browser would later
        deadline = time.monotonic() + 15
        while RecordingStore(wall.path, readonly=True).span() is None:
            assert time.monotonic() < deadline, "the shared hub wrote no frame"
            time.sleep(0.1)
        try:
            for seen in viewers:
                feed = FollowFeed(RecordingStore(wall.path, readonly=True))
                feed.start(seen)
                feeds.append(feed)
            for seen in viewers:
                seen.first(lambda s: waiting(s) == 0, 15.0, "with the empty queue")
            r.config_resetstat()
            for n in range(7):
                r.xadd(STREAM, {"prompt": f"wall {n}"})
            began = time.monotonic()
            for seen in viewers:  # both follow the fleet as it changes
                seen.first(lambda s: waiting(s) == 7, 15.0, "with 7 waiting")
            time.sleep(max(0.0, 3.0 - (time.monotonic() - began)))
            took = time.monotonic() - began
            stats = r.info("commandstats")
            clients = gpucon_clients(r)
        finally:
            for feed in feeds:
                feed.stop()
    r.close()
    assert clients == ["gpucon"], clients  # the shared hub's connection, and no viewer's
    # one reader at a 0.5 s cadence: about took / 0.5 reads (each one XLEN); two readers
    # would make twice that
    reads = stats["cmdstat_xlen"]["calls"]
    assert 1 <= reads <= took / 0.5 + 2, (reads, took)
    assert all(len(seen.snapshots) >= 3 for seen in viewers)


def test_a_silent_shared_reader_is_not_shown_as_current() -> None:
    from gpucon.model.fleet import SourceStatus

    last = Snapshot(
        taken_at=100.0, sources={"redis": SourceStatus("redis", Health.OK, None, 99.5, 0.01)}
    )
    shown = silent_snapshot(last, now=130.0, last_frame_at=100.0)
    status = shown.sources["redis"]
    assert shown.taken_at == 130.0 and status.health is Health.DOWN
    assert status.age_s(shown.taken_at) == pytest.approx(30.5)  # its true age, not 0.5 s
    assert status.error is not None and "shared reader has written nothing since" in status.error
