"""A dead scheduler's backends get nothing more, yet a 1-minute req/s still averages the minute
before: while the silence is within the rate's window, REQ/S is drawn not current (stale, with
the heartbeat's age), as INFL is.

Real components: the lab stack (redis-server fixture, a backend server, the reference
scheduler, prometheus scraping the backend), real traffic into the stream, and the console's
session hub built from the lab's own config.
"""

from __future__ import annotations

import os
import shutil
import signal
import threading
from pathlib import Path

import pytest
import redis

from gpucon.config import load_config
from gpucon.model.scheduler_beat import SCHEDULER
from gpucon.model.snapshot import Snapshot
from gpucon.session import open_session
from gpucon.widgets.row_builder import build_rows
from gpucon.widgets.slot_cells import cell
from tests.helpers.lab_stack import start_lab
from tests.helpers.latest_snapshot import Latest

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(shutil.which("prometheus") is None, reason="prometheus is not installed"),
]


def test_req_per_s_of_a_silent_schedulers_backends_is_not_current(
    redis_url: str, tmp_path: Path
) -> None:
    client = redis.Redis.from_url(redis_url, decode_responses=True)
    stop = threading.Event()
    model = "llm"  # the lab's default model

    def traffic() -> None:
        while not stop.wait(0.05):
            client.xadd("gen:queue", {"model": model, "prompt": "x"})

    sender = threading.Thread(target=traffic, daemon=True)
    with start_lab(redis_url, tmp_path / "lab", backends=1, prometheus=True) as lab:
        assert lab.config_path is not None
        (backend,) = lab.backends
        assert backend.model == model
        hub = open_session(load_config(lab.config_path, env={}), read_only=True).hub
        latest = Latest()
        sender.start()
        hub.start(latest)
        try:

            def rate(s: Snapshot) -> float:
                lat = s.latency.get(backend.name)
                return 0.0 if lat is None or lat.req_per_s is None else lat.req_per_s

            served = latest.wait(lambda s: rate(s) > 1.0, 60.0, "with a req/s over 1")
            assert served.value_age(f"latency:{backend.name}", "req_per_s") is None
            scheduler = next(p for p in lab.processes if p.name == "scheduler")
            assert scheduler.proc is not None
            os.kill(scheduler.proc.pid, signal.SIGKILL)
            scheduler.proc.wait(timeout=10)
            silent = latest.wait(
                lambda s: s.value_age(f"latency:{backend.name}", "req_per_s") is not None,
                20.0,
                "with req/s not current",
            )
        finally:
            stop.set()
            hub.stop()
    sender.join(timeout=5)
    client.close()
    key = f"latency:{backend.name}"
    assert silent.staleness.fields[key]["req_per_s"] == SCHEDULER
    assert rate(silent) > 0.5  # the window still averages traffic from before the kill
    assert silent.value_age(key, "req_per_s") == silent.value_age(
        f"backend:{backend.name}", "inflight"
    )  # the heartbeat's age, as INFL's
    row = next(r for r in build_rows(silent, 2500.0).values() if r.backend == backend.name)
    text, style = cell("rps", row, 10, "")
    assert style == "stale" and "·" in text, text
