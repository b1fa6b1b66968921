"""Kubernetes node MIG state through the hub, against the stand-in API server (the official
client speaks real HTTP to it): a node whose ``nvidia.com/mig.config.state`` stays ``pending``
past its limit raises a WARN alert naming it; ``failed`` raises CRIT at once; ``success``
clears both. Pending already at the console's first look, it is "pending ≥5m" (a lower
bound); seen to begin, "pending 5m". The snapshot (JSON and text) shows each node's MIG
config, state and cordon.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from gpucon.commands.snapshot_render import snapshot_document, snapshot_text
from gpucon.hub import Hub
from gpucon.model.alerts import Alert, AlertThresholds, Severity
from gpucon.model.snapshot import Snapshot
from gpucon.sources.kube import KubeSource
from tests.helpers.kube_standin import KubeStandIn
from tests.helpers.servers import wait_until
from tests.ui.fleet_fixture import FrozenClock

pytestmark = pytest.mark.integration

CONFIG = "nvidia.com/mig.config"
STATE = "nvidia.com/mig.config.state"
LIMIT_S = 300.0


def mig_alerts(snapshot: Snapshot) -> list[Alert]:
    return [a for a in snapshot.alerts if a.rule == "mig_config"]


def test_pending_past_its_limit_warns_failed_is_crit_success_clears(tmp_path: Path) -> None:
    with KubeStandIn() as standin:
        standin.add_node("gpu-a", {CONFIG: "all-1g.10gb", STATE: "pending"})
        standin.add_node("gpu-b", {CONFIG: "all-balanced", STATE: "success"}, unschedulable=True)
        kubeconfig = str(standin.write_kubeconfig(tmp_path / "kubeconfig"))
        clock = FrozenClock()
        source = KubeSource(kubeconfig=kubeconfig, timeout_s=5.0, clock=clock)
        hub = Hub([source], clock=clock, thresholds=AlertThresholds(mig_pending_for_s=LIMIT_S))
        try:

            def tick(seconds: float) -> Snapshot:
                clock.now += seconds
                hub.poll_once()
                return hub.tick()

            first = tick(0.0)
            assert first.nodes["gpu-a"].mig_config_state == "pending"
            assert first.mig_pending_since == {"gpu-a": clock.now}
            assert not mig_alerts(first)
            assert not mig_alerts(tick(LIMIT_S - 1.0))  # not yet past its limit
            (alert,) = mig_alerts(tick(1.0))
            assert alert.severity is Severity.WARNING and alert.target == "gpu-a"
            # pending already at the console's first look: at least that long
            assert "all-1g.10gb" in alert.message and "pending for ≥5m (> 300s)" in alert.message

            # what the snapshot says of the nodes: JSON and text
            snapshot = hub.latest
            assert snapshot is not None
            nodes = {n["name"]: n for n in snapshot_document(snapshot, "k")["nodes"]}
            assert nodes["gpu-a"]["mig_config_state"] == "pending"
            assert nodes["gpu-a"]["mig_pending_since"] == first.taken_at
            assert nodes["gpu-a"]["mig_pending_since_at_least"] is True
            assert nodes["gpu-b"]["unschedulable"] is True
            assert nodes["gpu-b"]["mig_pending_since"] is None
            text = "\n".join(snapshot_text(snapshot, "k"))
            assert "gpu-a" in text and "pending ≥5m" in text
            line_b = next(line for line in text.splitlines() if line.startswith("gpu-b "))
            assert "all-balanced" in line_b and "success" in line_b and "CORDONED" in line_b

            standin.update_node("gpu-a", {"metadata": {"labels": {STATE: "failed"}}})
            wait_until(
                lambda: tick(1.0).nodes["gpu-a"].mig_config_state == "failed",
                what="the failed state through the watch",
            )
            (alert,) = mig_alerts(hub.tick())
            assert alert.severity is Severity.CRITICAL and "failed" in alert.message
            assert hub.latest is not None and hub.latest.mig_pending_since == {}

            standin.update_node("gpu-a", {"metadata": {"labels": {STATE: "success"}}})
            wait_until(
                lambda: tick(1.0).nodes["gpu-a"].mig_config_state == "success",
                what="the success state through the watch",
            )
            assert not mig_alerts(hub.tick())
        finally:
            hub.stop()


def test_pending_again_starts_a_new_wait(tmp_path: Path) -> None:
    """A node that went pending, succeeded, then went pending again waits from the second time."""
    with KubeStandIn() as standin:
        standin.add_node("gpu-a", {CONFIG: "all-1g.10gb", STATE: "pending"})
        kubeconfig = str(standin.write_kubeconfig(tmp_path / "kubeconfig"))
        clock = FrozenClock()
        hub = Hub(
            [KubeSource(kubeconfig=kubeconfig, timeout_s=5.0, clock=clock)],
            clock=clock,
            thresholds=AlertThresholds(mig_pending_for_s=LIMIT_S),
        )
        try:

            def tick(seconds: float) -> Snapshot:
                clock.now += seconds
                hub.poll_once()
                return hub.tick()

            tick(0.0)
            tick(200.0)
            standin.update_node("gpu-a", {"metadata": {"labels": {STATE: "success"}}})
            wait_until(lambda: tick(1.0).nodes["gpu-a"].mig_config_state == "success")
            standin.update_node("gpu-a", {"metadata": {"labels": {STATE: "pending"}}})
            wait_until(lambda: tick(1.0).nodes["gpu-a"].mig_config_state == "pending")
            again = hub.latest
            assert again is not None
            assert again.mig_pending_since == {"gpu-a": clock.now}
            assert again.mig_pending_unseen == frozenset()  # this console saw it begin
            assert not mig_alerts(tick(LIMIT_S - 10.0))
            (alert,) = mig_alerts(tick(10.0))
            assert "pending for 5m (> 300s)" in alert.message  # exact: no "≥"
            assert hub.latest is not None
            text = "\n".join(snapshot_text(hub.latest, "k"))
            assert "pending 5m" in text and "≥" not in text
        finally:
            hub.stop()
