"""Read-only by construction: no Controls can be built in read-only mode."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpucon.config import FleetConfig, GpuconConfig, RedisConfig
from gpucon.controls.base import ReadOnlyError, build_controls
from gpucon.errors import ExitCode, Refused


def config(tmp_path: Path, redis: RedisConfig | None) -> GpuconConfig:
    return GpuconConfig(
        fleets={"default": FleetConfig(redis=redis)}, audit_path=tmp_path / "audit.jsonl"
    )


def test_build_controls_refuses_in_read_only_mode(tmp_path: Path) -> None:
    with pytest.raises(ReadOnlyError, match="read-only mode") as info:
        build_controls(config(tmp_path, RedisConfig(url="redis://127.0.0.1:1/0")), read_only=True)
    assert info.value.exit_code is ExitCode.REFUSED
    # nothing was written on the way to the refusal
    assert not (tmp_path / "audit.jsonl").exists()


def test_build_controls_needs_a_registry(tmp_path: Path) -> None:
    with pytest.raises(Refused, match=r"fleet 'default' has no \[redis\] section"):
        build_controls(config(tmp_path, None), read_only=False)


def test_build_controls_connects_lazily_and_names_operator(tmp_path: Path) -> None:
    cfg = config(tmp_path, RedisConfig(url="redis://127.0.0.1:1/0"))
    controls = build_controls(cfg, read_only=False)
    assert "@" in controls.operator
    assert controls.audit.path == tmp_path / "audit.jsonl"
    assert controls.kube is None
    controls.close()


def test_build_controls_with_kubernetes_configured_gets_a_kube_control(tmp_path: Path) -> None:
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
    controls = build_controls(cfg, read_only=False)
    assert isinstance(controls.kube, KubeControl)
    assert controls.kube_namespace == "ml"
    controls.close()
