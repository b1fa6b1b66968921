"""Backend liveness on a real lab stack: redis-server, KServe v2 backend servers, the reference
scheduler, prometheus when installed, real traffic.

``kill -9`` one backend server: within two hub ticks the snapshot shows it not ready and a
critical alert names it (``gpucon snapshot --json`` too); restarted, it is back within two
ticks. Waits poll with deadlines, so a busy machine slows the test but does not fail it; the
tick counts are what is asserted.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import signal
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest
import redis

from gpucon.commands.cli import main
from gpucon.config import load_config
from gpucon.hub import Hub
from gpucon.lab.lab import LabStack
from gpucon.lab.processes import ManagedProcess
from gpucon.lab.traffic import TrafficSpec, generate
from gpucon.model.alerts import Severity
from gpucon.model.snapshot import Snapshot
from gpucon.registry import keys
from gpucon.registry.parse import READY_FIELDS, parse_ready
from gpucon.session import open_session
from gpucon.sources.readiness import ReadinessSource
from tests.helpers.lab_stack import set_ready, start_lab
from tests.helpers.latest_snapshot import Snapshots
from tests.helpers.servers import free_port

pytestmark = pytest.mark.integration

PROMETHEUS = shutil.which("prometheus") is not None


def wait_for(check: Callable[[], bool], timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if check():
            return
        time.sleep(0.02)
    raise AssertionError(f"{what}: not within {timeout_s:.0f}s")


def process_of(stack: LabStack, name: str) -> ManagedProcess:
    return next(p for p in stack.processes if p.name == name)


def kill_hard(proc: ManagedProcess) -> None:
    assert proc.proc is not None
    os.kill(proc.proc.pid, signal.SIGKILL)
    proc.proc.wait(timeout=10)


def restart(stack: LabStack, proc: ManagedProcess, url: str) -> None:
    proc.start()  # same argv: the same port
    wait_for(lambda: _ready(url), 20, f"{proc.name} restarted")


def _ready(url: str) -> bool:
    try:
        return httpx.get(f"{url}/v2/health/ready", timeout=1.0).status_code == 200
    except httpx.HTTPError:
        return False


# -- the readiness source against real backend servers -----------------------------------------


def test_readiness_source_asks_each_backend_and_says_why_not(
    redis_url: str, tmp_path: Path
) -> None:
    with start_lab(redis_url, tmp_path / "lab", backends=2, scheduler=False) as stack:
        b0, b1 = stack.backends
        closed = f"http://127.0.0.1:{free_port()}"
        source = ReadinessSource(timeout_s=1.0, request_timeout_s=0.4)
        source.observe_backends({b0.name: b0.url, b1.name: b1.url, "gone": closed})
        first = {c.backend: c for c in source.read().ready_checks}
        assert {n: (c.ready, c.error) for n, c in first.items()} == {
            "lab-b0": (True, None),
            "lab-b1": (True, None),
            "gone": (False, "refused"),
        }
        set_ready(b1.url, False)
        second = source.read()
        by_name = {c.backend: c for c in second.ready_checks}
        assert (by_name["lab-b1"].ready, by_name["lab-b1"].error) == (False, "status 503")
        assert by_name["lab-b0"] is first["lab-b0"]  # unchanged answers are the same objects
        assert second.health.value == "ok" and second.round_trips == 3
        assert source.read().ready_checks is second.ready_checks  # nothing new: the same tuple

        # a hung server (stopped, its socket still open): a timeout, within the read deadline
        proc = process_of(stack, b0.name)
        assert proc.proc is not None
        os.kill(proc.proc.pid, signal.SIGSTOP)
        try:
            started = time.monotonic()
            hung = {c.backend: c for c in source.read().ready_checks}
            took = time.monotonic() - started
            # one check at a time and a short deadline: the hung one uses it all up, the rest
            # are not reported (no answer is not an answer), and the next round starts there
            tight = ReadinessSource(timeout_s=0.3, request_timeout_s=0.3, concurrency=1)
            tight.observe_backends({b0.name: b0.url, b1.name: b1.url, "gone": closed})
            cut = tight.read()
            assert cut.health.value == "degraded" and cut.error is not None
            assert "not checked by the deadline" in cut.error
            assert "lab-b1" not in {c.backend for c in cut.ready_checks}
            assert "lab-b1" in {c.backend for c in tight.read().ready_checks}
        finally:
            os.kill(proc.proc.pid, signal.SIGCONT)
        assert (hung["lab-b0"].ready, hung["lab-b0"].error) == (False, "timeout")
        assert took < 1.5


def test_scheduler_publishes_ready_and_ready_at(redis_url: str, tmp_path: Path) -> None:
    client = redis.Redis.from_url(redis_url, decode_responses=True)
    with start_lab(redis_url, tmp_path / "lab", backends=2) as stack:
        version = client.get(keys.VERSION)

        def fields() -> dict[str, str]:
            """lab-b1's verdict in the scheduler's shared readiness document."""
            raw = client.get(keys.READY)
            verdicts, problems = parse_ready(None if raw is None else str(raw))
            assert problems == ()
            return dict(zip(READY_FIELDS, verdicts.get("lab-b1", ("", "0")), strict=False))

        wait_for(lambda: fields().get("ready") == "1", 20, "ready=1 published")
        first_at = float(fields()["ready_at"])
        assert abs(time.time() - first_at) < 5
        wait_for(lambda: float(fields()["ready_at"]) > first_at, 10, "ready_at refreshed")
        killed_at = time.time()
        kill_hard(process_of(stack, "lab-b1"))
        wait_for(lambda: fields().get("ready") == "0", 10, "ready=0 published after the kill")
        # dated by the check that first saw it: the kill, not the newest check
        since = float(fields()["ready_since"])
        assert killed_at <= since <= killed_at + 3, (since, killed_at)
        checked = float(fields()["ready_at"])
        wait_for(lambda: float(fields()["ready_at"]) > checked, 10, "ready_at refreshed")
        assert float(fields()["ready_since"]) == since  # the next checks keep the date
        # a health check is not a registry change: plans that recorded the version stay valid
        assert client.get(keys.VERSION) == version
    client.close()


# -- the console's view: hub ticks, alerts, snapshot --json --------------------------------------


def not_ready(name: str) -> Callable[[Snapshot], bool]:
    def check(s: Snapshot) -> bool:
        lv = s.liveness.get(name)
        crit = any(
            a.rule == "not_ready" and a.target == name and a.severity is Severity.CRITICAL
            for a in s.alerts
        )
        return lv is not None and lv.serving is False and crit

    return check


def serving(name: str) -> Callable[[Snapshot], bool]:
    def check(s: Snapshot) -> bool:
        lv = s.liveness.get(name)
        return (
            lv is not None
            and lv.serving is True
            and not any(a.target == name and a.rule == "not_ready" for a in s.alerts)
        )

    return check


@pytest.fixture
def traffic(redis_url: str) -> Iterator[None]:
    """20 requests/s into gen:queue for as long as the test runs."""
    stop = threading.Event()

    async def run() -> None:
        import redis.asyncio as aioredis

        client = aioredis.Redis.from_url(redis_url)
        spec = TrafficSpec(rate_per_s=20.0, max_count=100_000, max_duration_s=600.0)
        stopped = asyncio.Event()

        async def watch() -> None:
            while not stop.is_set():
                await asyncio.sleep(0.1)
            stopped.set()

        watcher = asyncio.create_task(watch())
        try:
            await generate(client, spec, stopped)
        finally:
            watcher.cancel()
            await client.aclose()

    thread = threading.Thread(target=lambda: asyncio.run(run()), daemon=True)
    thread.start()
    yield
    stop.set()
    thread.join(timeout=10)


def snapshot_json(config: Path, capsys: pytest.CaptureFixture[str]) -> dict[str, object]:
    capsys.readouterr()
    main(["--config", str(config), "snapshot", "--json"])
    doc: dict[str, object] = json.loads(capsys.readouterr().out)
    return doc


def test_killed_backend_is_not_ready_within_two_ticks_and_back_after_restart(
    redis_url: str,
    tmp_path: Path,
    traffic: None,
    capsys: pytest.CaptureFixture[str],
) -> None:
    with start_lab(redis_url, tmp_path / "lab", backends=3, prometheus=PROMETHEUS) as stack:
        assert stack.config_path is not None
        config = load_config(stack.config_path, env={})
        hub: Hub = open_session(config, read_only=True).hub
        assert [s.name for s in hub.sources][-1] == "readiness"
        ticks = Snapshots()
        hub.start(ticks)
        try:
            # the readiness checks wait for the registry's first read: the first snapshots
            # already carry every backend's own answer
            early = ticks.first(lambda s: s.seq == 2, 30, "number 2", after_seq=0)
            assert {n: lv.http_ready for n, lv in early.liveness.items()} == dict.fromkeys(
                ("lab-b0", "lab-b1", "lab-b2"), True
            )
            ticks.first(serving("lab-b1"), 30, "with lab-b1 serving", after_seq=0)
            victim = process_of(stack, "lab-b1")
            url = next(b.url for b in stack.backends if b.name == "lab-b1")

            kill_seq = ticks.seq
            kill_hard(victim)
            seen = ticks.first(not_ready("lab-b1"), 30, "with lab-b1 not ready", after_seq=kill_seq)
            ticks_to_not_ready = seen.seq - kill_seq
            lv = seen.liveness["lab-b1"]
            assert lv.http_ready is False and lv.http_error == "refused"
            alert = next(a for a in seen.alerts if a.target == "lab-b1" and a.rule == "not_ready")
            assert alert.message.startswith("not ready: http refused")
            # the others keep serving
            assert all(seen.liveness[n].serving for n in ("lab-b0", "lab-b2"))

            doc = snapshot_json(stack.config_path, capsys)
            one_shot = {item["name"]: item for item in doc["liveness"]}  # type: ignore[attr-defined]
            assert one_shot["lab-b1"]["serving"] is False
            assert one_shot["lab-b0"]["serving"] is True
            assert any(
                a["target"] == "lab-b1" and a["severity"] == "critical"
                for a in doc["alerts"]  # type: ignore[attr-defined]
            )

            if PROMETHEUS:  # Prometheus notices too; its rates stop looking current
                later = ticks.first(
                    lambda s: s.liveness["lab-b1"].prom_up is False,
                    30,
                    "with lab-b1's prometheus up=0",
                    after_seq=seen.seq - 1,
                )
                lat = later.latency.get("lab-b1")
                assert lat is None or lat.req_per_s is None
                assert "prometheus up=0" in later.liveness["lab-b1"].because

            restart(stack, victim, url)  # returns once it answers ready again
            up_seq = ticks.seq
            back = ticks.first(serving("lab-b1"), 30, "with lab-b1 back", after_seq=up_seq)
            ticks_to_back = back.seq - up_seq
        finally:
            hub.stop()
    print(f"\nticks to not ready: {ticks_to_not_ready}; ticks back after restart: {ticks_to_back}")
    assert ticks_to_not_ready <= 2
    assert ticks_to_back <= 2


@pytest.mark.skipif(not PROMETHEUS, reason="prometheus is not installed")
def test_a_console_started_mid_outage_dates_it_from_prometheus(
    redis_url: str, tmp_path: Path
) -> None:
    """A backend killed a while before the console starts: its not-ready alert is as old as
    the kill on the console's first ticks (Prometheus's last ``up`` = 1), not "<2s"; the
    signals this console only now sees say "for at least" once it has watched a while."""
    with start_lab(redis_url, tmp_path / "lab", backends=2, prometheus=True) as stack:
        assert stack.config_path is not None
        config = load_config(stack.config_path, env={})
        victim = process_of(stack, "lab-b1")
        prometheus = config.fleet.prometheus
        assert prometheus is not None

        def up_of(url: str) -> float | None:
            r = httpx.get(f"{prometheus.url}/api/v1/query", params={"query": "up"}, timeout=5)
            for series in r.json()["data"]["result"]:
                if url.endswith(series["metric"]["instance"]):
                    return float(series["value"][1])
            return None

        url = next(b.url for b in stack.backends if b.name == "lab-b1")
        wait_for(lambda: up_of(url) == 1.0, 30, "lab-b1 scraped up")
        killed_at = time.time()
        kill_hard(victim)
        wait_for(lambda: up_of(url) == 0.0, 30, "prometheus sees lab-b1 down")
        time.sleep(8)  # the outage is older than anything this console could see itself

        hub: Hub = open_session(config, read_only=True).hub
        opened_at = time.time()
        ticks = Snapshots()
        hub.start(ticks)
        try:

            def dated_down(s: Snapshot) -> bool:
                lv = s.liveness.get("lab-b1")
                return (
                    lv is not None
                    and lv.prom_since is not None
                    and lv.prom_since.seen
                    and any(a.rule == "not_ready" and a.target == "lab-b1" for a in s.alerts)
                )

            first_down = ticks.first(
                lambda s: (lv := s.liveness.get("lab-b1")) is not None and lv.prom_up is False,
                30,
                "with lab-b1's prometheus up=0",
                after_seq=0,
            )
            # dated by the read that saw it down, or by the next when that read's deadline was
            # spent (a loaded machine)
            dated = ticks.first(
                dated_down, 30, "with lab-b1 dated down", after_seq=first_down.seq - 1
            )
            assert dated.seq - first_down.seq <= 3
            alert = next(a for a in dated.alerts if a.rule == "not_ready" and a.target == "lab-b1")
            # dated by Prometheus: the step after the last up=1 sample before the kill (1 s
            # scrapes, 1 s subquery steps)
            assert killed_at - 3 <= alert.since <= killed_at + 2, (alert.since, killed_at)
            assert alert.since < opened_at - 6
            lv = dated.liveness["lab-b1"]
            assert lv.prom_since is not None and lv.prom_since.seen
            assert "prometheus up=0 for " in alert.message
            assert "≥" not in alert.message.split("prometheus up=0 for ", 1)[1][:2]
            # http: this console saw only refusals, so after a while it says "for at least"
            watched = ticks.first(
                lambda s: (
                    s.taken_at - opened_at > 3
                    and any("http refused for ≥" in a.message for a in s.alerts)
                ),
                30,
                "saying http refused for at least",
                after_seq=dated.seq,
            )
            lv = watched.liveness["lab-b1"]
            assert lv.http_since is not None and not lv.http_since.seen
        finally:
            hub.stop()


def test_a_console_started_mid_outage_dates_registry_not_ready_by_the_scheduler(
    redis_url: str, tmp_path: Path
) -> None:
    """A backend killed a while before the console starts: the scheduler dated its ready=0
    in ``gpucon:ready``, so the console's registry signal says "for 5s" (seen), not "for at
    least" from its own first look, and the not-ready alert is as old as the kill."""
    client = redis.Redis.from_url(redis_url, decode_responses=True)
    with start_lab(redis_url, tmp_path / "lab", backends=2) as stack:
        assert stack.config_path is not None
        config = load_config(stack.config_path, env={})

        def registry_says(value: str) -> bool:
            raw = client.get(keys.READY)
            verdicts, _ = parse_ready(None if raw is None else str(raw))
            return verdicts.get("lab-b1", ("",))[0] == value

        wait_for(lambda: registry_says("1"), 20, "ready=1 published")
        killed_at = time.time()
        kill_hard(process_of(stack, "lab-b1"))
        wait_for(lambda: registry_says("0"), 10, "ready=0 published")
        time.sleep(6)  # older than anything this console could see itself
        hub: Hub = open_session(config, read_only=True).hub
        opened_at = time.time()
        ticks = Snapshots()
        hub.start(ticks)
        try:
            dated = ticks.first(
                lambda s: (
                    (lv := s.liveness.get("lab-b1")) is not None
                    and lv.registry_ready is False
                    and lv.registry_fresh
                    and any(a.rule == "not_ready" and a.target == "lab-b1" for a in s.alerts)
                ),
                30,
                "with lab-b1's registry ready=0 and its alert",
            )
        finally:
            hub.stop()
    client.close()
    lv = dated.liveness["lab-b1"]
    assert lv.registry_since is not None and lv.registry_since.seen
    assert killed_at <= lv.registry_since.at <= killed_at + 3
    alert = next(a for a in dated.alerts if a.rule == "not_ready" and a.target == "lab-b1")
    assert alert.since <= lv.registry_since.at < opened_at - 4
    assert "registry ready=0 for " in alert.message
    assert "≥" not in alert.message.split("registry ready=0 for ", 1)[1][:2]
