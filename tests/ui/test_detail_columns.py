"""The detail's backend lines keep MODEL under its header whatever the latency cells say."""

from __future__ import annotations

from gpucon.model.fleet import Backend, LatencyStats
from gpucon.model.snapshot import Snapshot
from gpucon.screens.detail import backend_lines


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
