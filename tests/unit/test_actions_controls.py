"""Read-only by construction: a read-only session has no way to build Controls."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpucon.config import FleetConfig, GpuconConfig, RedisConfig
from gpucon.controls.base import ReadOnlyError
from gpucon.errors import ExitCode, Refused
from gpucon.session import live_controls, open_session


def config(tmp_path: Path, redis: RedisConfig | None) -> GpuconConfig:
    return GpuconConfig(
        fleets={"default": FleetConfig(redis=redis)}, audit_path=tmp_path / "audit.jsonl"
    )


def test_a_read_only_session_refuses_to_build_controls(tmp_path: Path) -> None:
    session = open_session(
        config(tmp_path, RedisConfig(url="redis://127.0.0.1:1/0")), read_only=True
    )
    assert session.controls_factory is None
    with pytest.raises(ReadOnlyError, match="read-only mode") as info:
        session.controls()
    assert info.value.exit_code is ExitCode.REFUSED
    # nothing was written on the way to the refusal
    assert not (tmp_path / "audit.jsonl").exists()


def test_a_config_that_says_read_only_gives_a_read_only_session(tmp_path: Path) -> None:
    from msgspec.structs import replace

    cfg = replace(config(tmp_path, RedisConfig(url="redis://127.0.0.1:1/0")), read_only=True)
    session = open_session(cfg, read_only=False)
    assert session.read_only and session.controls_factory is None
    with pytest.raises(ReadOnlyError):
        session.controls()


def test_live_controls_need_a_registry(tmp_path: Path) -> None:
    with pytest.raises(Refused, match=r"fleet 'default' has no \[redis\] section"):
        live_controls(config(tmp_path, None))


def test_session_controls_connect_lazily_and_names_operator(tmp_path: Path) -> None:
    cfg = config(tmp_path, RedisConfig(url="redis://127.0.0.1:1/0"))
    controls = open_session(cfg).controls()
    assert "@" in controls.operator
    assert controls.audit.path == tmp_path / "audit.jsonl"
    assert controls.audit.fleet == "default"  # every record names the fleet it acted on
    assert controls.kube is None
    controls.close()


def test_live_controls_with_kubernetes_configured_gets_a_kube_control(tmp_path: Path) -> None:
    from gpucon.config import KubeConfig
    from gpucon.controls.kube import KubeControl

    cfg = GpuconConfig(
        fleets={
            "default": FleetConfig(
                redis=RedisConfig(url="redis://127.0.0.1:1/0"),
                kube=KubeConfig(kubeconfig=str(tmp_path / "kubeconfig"), namespace="ml"),
            )
        },
        audit_path=tmp_path / "audit.jsonl",
    )
    controls = live_controls(cfg)
    assert isinstance(controls.kube, KubeControl)
    assert controls.kube_namespace == "ml"
    controls.close()
