"""The detail's backend lines keep MODEL under its header whatever the latency cells say."""

from __future__ import annotations

import msgspec

from gpucon.model.fleet import Backend, BackendState, LatencyStats
from gpucon.model.snapshot import Snapshot
from gpucon.screens.detail import backend_lines
from gpucon.widgets.fmt import number


def test_model_stays_under_its_header_with_no_latency_source() -> None:
    backends = (
        Backend("with-latency", slot_id="h/gpu0", model="sd15"),
        Backend("without-latency", slot_id="h/gpu0", model="sdxl"),
    )
    snapshot = Snapshot(
        taken_at=1.0,
        backends={b.name: b for b in backends},
        latency={"with-latency": LatencyStats("with-latency", req_per_s=2.0, p95_ms=900.0)},
    )
    text = backend_lines(backends, snapshot, 2000.0).plain.splitlines()
    column = text[0].index("MODEL")
    line = {b.name: next(t for t in text if t.startswith(b.name)) for b in backends}
    assert line["with-latency"][column:].startswith("sd15")
    assert line["without-latency"][column:].startswith("sdxl")  # not "…sourcesdxl"
    assert "n/a: no latency source" in line["without-latency"]


def test_a_down_backend_shows_no_rate_now_in_the_detail_either() -> None:
    """The table says "—" for a down backend's REQ/S; its detail said "0.1" (the source's
    window winding down) in the same column."""
    from tests.ui.rig import sim_rig

    snapshot = sim_rig(scenario="backend-down").step(20)  # down since tick 13
    down = snapshot.backends["sdxl-c0"]
    rate = snapshot.latency["sdxl-c0"].req_per_s
    assert down.state.value == "down" and rate is not None and rate > 0
    text = backend_lines((down,), snapshot, 14000.0).plain.splitlines()
    rps_end = text[0].index("REQ/S") + len("REQ/S 10s")
    column = text[0].index("MODEL")
    line = next(t for t in text if t.startswith("sdxl-c0"))
    assert line[:rps_end].rstrip().endswith(" —"), line
    assert "before" in line and f"{rate:.1f}" not in line[: rps_end + 1]
    # NOT READY while the registry says active: n/a, as the table's cell
    not_ready = msgspec.structs.replace(down, state=BackendState.ACTIVE)
    line = backend_lines((not_ready,), snapshot, 14000.0).plain.splitlines()[1]
    assert line[:rps_end].rstrip().endswith(" n/a"), line
    # its scrape target dead, Prometheus's values withheld: nothing said to be from before
    withheld = {**snapshot.latency, "sdxl-c0": LatencyStats("sdxl-c0")}
    blank = msgspec.structs.replace(snapshot, latency=withheld)
    line = backend_lines((not_ready,), blank, 14000.0).plain.splitlines()[1]
    assert "before" not in line and line[column:].startswith("sdxl"), line
    # a backend that serves: its rate as it is
    alive = snapshot.backends["sdxl-a0-gi1"]
    line = backend_lines((alive,), snapshot, 14000.0).plain.splitlines()[1]
    assert line[:rps_end].rstrip().endswith(number(snapshot.latency["sdxl-a0-gi1"].req_per_s, 1))
    # each value ends where its header does (they sat one cell right of it from INFL on)
    head = backend_lines((alive,), snapshot, 14000.0).plain.splitlines()[0]
    for header in ("INFL", "P50", "P95", "P99"):
        end = head.index(header) + len(header)
        assert line[end - 1] != " " and line[end] == " ", (header, head, line)
