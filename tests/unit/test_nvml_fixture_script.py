"""The synthesized A100 NVML fixture is what its script writes, and the layout it holds is one
the card can place (tests/fixtures/mig's A100-80GB placements)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from tests.helpers.mig_tables import table as mig_table

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
SCRIPT = FIXTURES / "nvml" / "synthesize_a100_mig.py"


def test_the_script_writes_exactly_the_committed_fixture(tmp_path: Path) -> None:
    out = tmp_path / "a100_mig.json"
    subprocess.run([sys.executable, str(SCRIPT), str(out)], check=True, capture_output=True)
    assert out.read_bytes() == (FIXTURES / "nvml" / "a100_mig.json").read_bytes()


def test_its_layout_can_be_placed_and_its_numbers_agree() -> None:
    doc = json.loads((FIXTURES / "nvml" / "a100_mig.json").read_text())
    layout = doc["meta"]["layout"]
    assert layout == ["3g.40gb", "2g.20gb", "1g.10gb"]
    assert layout[0] in doc["meta"]["note"] and "SYNTHESIZED" in doc["meta"]["note"]
    table = mig_table("a100_80gb")
    assert table.validate_layout(layout) == []
    # the layout it once held cannot be placed: the docstring says so, the table agrees
    assert table.validate_layout(["3g.40gb", "3g.40gb", "1g.10gb"]) != []
    calls = doc["calls"]

    def answers(fn: str, handle: str) -> list[dict[str, Any]]:
        return [
            c["result"]["fields"]
            for c in calls
            if c["fn"] == fn and c["args"][0]["handle"] == handle
        ]

    migs = [f"gpu0/mig{i}" for i in range(3)]
    used = [answers("nvmlDeviceGetMemoryInfo", m)[0]["used"] for m in migs]
    [whole] = answers("nvmlDeviceGetMemoryInfo", "gpu0")
    assert whole["used"] == sum(used)  # NVML's aggregate over the instances in MIG mode
    for mig, profile in zip(migs, layout, strict=True):
        [attrs] = answers("nvmlDeviceGetAttributes", mig)
        [mem] = answers("nvmlDeviceGetMemoryInfo", mig)
        assert mem["total"] == attrs["memorySizeMB"] * 1024**2
        assert f"{attrs['gpuInstanceSliceCount']}g" == profile.split(".")[0]
