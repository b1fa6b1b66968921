"""The MPS source (read-only, with a timeout) against the stand-in control program, built the
way a live session builds it from ``[[fleets.NAME.mps]]``; and the slot detail that shows it."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from gpucon.config import FleetConfig
from gpucon.config.mps import MpsDaemonConfig
from gpucon.controls.mps_daemons import command_daemon
from gpucon.model.fleet import Health, MpsState, Slot, SlotKind
from gpucon.model.merge import merge_readings
from gpucon.model.snapshot import Snapshot
from gpucon.session.sources import build_sources
from gpucon.sources.mps import MpsReader, parse_clients, read_daemon
from gpucon.widgets.slot_facts import health_facts
from tests.helpers.mps_standin import install_control


@pytest.fixture
def fleet(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> FleetConfig:
    install_control(tmp_path / "bin")
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("MPS_STANDIN_LOG", str(tmp_path / "standin.log"))
    daemon = MpsDaemonConfig(
        target="h1/gpu0",
        pipe_dir=str(tmp_path / "pipe"),
        log_dir=str(tmp_path / "log"),
        timeout_s=1.0,
    )
    return FleetConfig(name="t", mps=(daemon,))


def test_a_session_reads_the_daemon_down_then_up_with_servers_and_clients(
    fleet: FleetConfig, tmp_path: Path
) -> None:
    (source,) = [s for s in build_sources(fleet) if s.name == "mps"]
    try:
        down = source.read()
        assert down.health is Health.OK
        assert down.mps == (("h1/gpu0", MpsState(daemon_running=False)),)
        daemon = command_daemon(fleet.mps[0])
        daemon.start(2)
        (tmp_path / "pipe" / "servers").write_text("4242\n")
        # as driver 580 answers on the H200: the device, then PID.N per client
        (tmp_path / "pipe" / "clients_4242").write_text(
            "[0] 00:00.0, NVIDIA H200\n5001.1\n5002.1\n"
        )
        daemon.set_default_pinned_mem_limit("0", "16G")
        (target, state) = source.read().mps[0]
        assert target == "h1/gpu0"
        assert state.daemon_running is True and state.default_thread_pct == 100.0
        assert state.thread_pct_by_server == (("4242", 100.0),)
        assert state.clients_by_server == (("4242", (5001, 5002)),)
        assert state.pinned_mem_limit == "16G"
        sent = [
            line.removeprefix("stdin:")
            for line in (tmp_path / "standin.log").read_text().splitlines()
            if line.startswith("stdin:")
        ]
        reads = sent[sent.index("get_server_list") - 1 :]
        assert reads and all(c.startswith("get_") for c in reads), "the source only reads"
        daemon.stop(2)
    finally:
        source.close()


def test_a_daemon_that_does_not_answer_is_reported_within_the_timeout(
    fleet: FleetConfig, monkeypatch: pytest.MonkeyPatch
) -> None:
    command_daemon(fleet.mps[0]).start(2)
    monkeypatch.setenv("MPS_STANDIN_HANG", "1")  # every command now takes 5 s
    (source,) = [s for s in build_sources(fleet) if s.name == "mps"]
    source.timeout_s = 0.5
    started = time.monotonic()
    reading = source.read()
    assert time.monotonic() - started < 2.0
    assert reading.health is Health.DOWN and reading.mps == ()
    assert reading.error is not None and "h1/gpu0" in reading.error
    source.close()
    monkeypatch.delenv("MPS_STANDIN_HANG")
    command_daemon(fleet.mps[0]).stop(2)


def test_client_lists_as_the_h200_answers() -> None:
    assert parse_clients("[0] 00:00.0, NVIDIA H200\n493.1\n") == (493,)
    assert parse_clients("[0] 00:00.0, NVIDIA H200\n668.1\n674.2\n") == (668, 674)
    assert parse_clients("") == ()


def test_a_daemon_read_sends_only_get_commands() -> None:
    sent: list[str] = []

    def ask(command: str) -> str:
        sent.append(command)
        return "7 8" if command == "get_server_list" else "50"

    state = read_daemon(MpsReader("x", ask))
    assert state.thread_pct_by_server == (("7", 50.0), ("8", 50.0))
    assert "get_device_client_list 7" in sent
    assert all(c.startswith("get_") for c in sent)


def test_the_detail_shows_the_daemon_read_for_the_slot() -> None:
    slot = Slot("h1/gpu0", SlotKind.GPU, host="h1", gpu_uuid="GPU-1", gpu_index=0)
    state = MpsState(True, 90.0, (("4242", 60.0),), "8G", (("4242", (5001, 5002)),))
    reading_mps = (("h1/gpu0", state),)
    from gpucon.model.reading import Reading

    merged = merge_readings([Reading("mps", Health.OK, 0.0, mps=reading_mps)])
    snapshot = Snapshot(taken_at=0.0, slots={slot.id: slot}, mps=merged.mps)
    text = health_facts(slot, snapshot).plain
    assert "MPS daemon (read from it)" in text
    assert "running (h1/gpu0)" in text and "90% of SMs, pinned 8G" in text
    assert "server 4242" in text and "2 client(s) 5001, 5002" in text
    down = Snapshot(taken_at=0.0, slots={slot.id: slot}, mps={"h1/gpu0": MpsState(False)})
    assert "NOT RUNNING" in health_facts(slot, down).plain
    assert "MPS daemon" not in health_facts(slot, Snapshot(taken_at=0.0)).plain
