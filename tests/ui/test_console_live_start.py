"""A live console's start: its sources are read before the App is built, so the first frame
shows what they answered; and the session they read in is closed however the start ends."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpucon.app import GpuconApp
from gpucon.commands.cli import main
from gpucon.model.fleet import Health
from gpucon.model.snapshot import Snapshot
from gpucon.session import Session

NVML_ONLY = 'fleet = "local"\nread_only = true\n\n[fleets.local.nvml]\nhost = ""\ntimeout_s = 2.0\n'


@pytest.fixture
def nvml_config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    for name in ("GPUCON_CONFIG", "GPUCON_REDIS_URL", "GPUCON_PROMETHEUS_URL"):
        monkeypatch.delenv(name, raising=False)
    config = tmp_path / "config.toml"
    config.write_text(NVML_ONLY)
    return config


def test_the_first_snapshot_is_made_from_the_first_reads_before_the_app_runs(
    nvml_config: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The NVML source really reads (here it answers that NVML is not available, or with the
    GPUs of a machine that has some): the App is given that snapshot to draw first."""
    first: list[Snapshot | None] = []

    def run(app: GpuconApp, *args: object, **kwargs: object) -> None:
        first.append(app.snapshot)

    monkeypatch.setattr(GpuconApp, "run", run)
    assert main(["live", "--config", str(nvml_config), "--read-only"]) == 0
    snapshot = first[0]
    assert snapshot is not None, "the first frame would have been drawn without data"
    status = snapshot.sources["nvml"]
    assert status.error != "not read yet"
    assert status.health in (Health.OK, Health.DEGRADED) or "NVML" in (status.error or "")


def test_the_session_is_closed_when_the_console_cannot_start(
    nvml_config: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    closed: list[Session] = []
    real_close = Session.close

    def close(session: Session) -> None:
        closed.append(session)
        real_close(session)

    def broken(app: GpuconApp, *args: object, **kwargs: object) -> None:
        raise RuntimeError("the App could not be built")

    monkeypatch.setattr(Session, "close", close)
    monkeypatch.setattr(GpuconApp, "__init__", broken)
    with pytest.raises(RuntimeError, match="could not be built"):
        main(["live", "--config", str(nvml_config), "--read-only"])
    assert len(closed) == 1  # its first reads' workers stopped, its sources closed
