"""``gpucon probe`` end to end against the lab stack: exit codes, nothing sent when refused."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers.lab_stack import served, start_lab

pytestmark = pytest.mark.integration


def gpucon(config: Path, *args: str, state: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "XDG_STATE_HOME": str(state)}
    return subprocess.run(
        [sys.executable, "-m", "gpucon.commands.cli", "--config", str(config), "probe", *args],
        capture_output=True, text=True, timeout=60, env=env, stdin=subprocess.DEVNULL,
    )  # fmt: skip


def test_probe_verb_exit_codes_and_nothing_sent_when_refused(
    redis_url: str, tmp_path: Path
) -> None:
    with start_lab(redis_url, tmp_path / "lab", backends=1, service_ms=5) as lab:
        assert lab.config_path is not None
        url = lab.backends[0].url
        cfg, state = lab.config_path, tmp_path / "state"

        bad = gpucon(cfg, "lab-b0", "--count", "5000", "--yes", state=state)
        assert bad.returncode == 2
        assert "count: 5000 exceeds the cap 200" in bad.stderr

        unknown = gpucon(cfg, "elsewhere", "--yes", state=state)
        assert unknown.returncode == 2 and "target:" in unknown.stderr

        read_only = gpucon(cfg, "lab-b0", "--count", "5", "--yes", "--read-only", state=state)
        assert read_only.returncode == 3 and "read-only" in read_only.stderr

        dry = gpucon(cfg, "lab-b0", "--count", "5", "--dry-run", state=state)
        assert dry.returncode == 0 and "send up to 5 requests" in dry.stdout
        # the options left out come from the backend's service time (none known here: no
        # Prometheus in this lab), and the plan says which were given
        assert "params: count as given; the rest defaults from service time n/a" in dry.stdout

        unconfirmed = gpucon(cfg, "lab-b0", "--count", "5", state=state)
        assert unconfirmed.returncode == 3 and "--yes" in unconfirmed.stderr
        assert served(url) == []  # none of the refused runs sent anything

        ok = gpucon(cfg, "lab-b0", "--count", "20", "--rate", "20", "--concurrency", "2",
                    "--yes", "--json", state=state)  # fmt: skip
        assert ok.returncode == 0, ok.stderr
        outcome = json.loads(ok.stdout.strip().splitlines()[-1])["outcome"]
        assert outcome["details"]["succeeded"] == 20 and outcome["details"]["errors"] == {}
        assert len(served(url)) == 20
        audit = (lab.directory / "audit.jsonl").read_text().splitlines()
        assert [json.loads(line)["event"] for line in audit][-1] == "outcome"
