"""Alerts on GPU health (XID, thermal slowdown, power at its limit) and on Kubernetes nodes'
MIG reconfiguration (failed, or pending past its limit), and their thresholds in the config."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from msgspec.structs import replace

from gpucon.config import load_config
from gpucon.model.alerts import (
    Alert,
    AlertInputs,
    AlertThresholds,
    Severity,
    derive_alerts,
    track_mig_pending,
)
from gpucon.model.fleet import Gpu, Health, NodeInfo, SourceStatus
from gpucon.model.history import History

T = AlertThresholds()
UUID = "GPU-0f1e"


def gpu(**fields: object) -> Gpu:
    base = Gpu(uuid=UUID, host="node-a", index=3, name="NVIDIA H200", temperature_c=61.0)
    return replace(base, **fields)  # type: ignore[arg-type]


def inputs(now: float, gpus: tuple[Gpu, ...] = (), **parts: object) -> AlertInputs:
    base: dict[str, object] = dict(
        now=now,
        slots={},
        backends={},
        latency={},
        queues={},
        sources={"nvml": SourceStatus("nvml", Health.OK, None, now, 0.01)},
        history=History(),
        gpus={g.uuid: g for g in gpus},
    )
    base.update(parts)
    return AlertInputs(**base)  # type: ignore[arg-type]


def only(alerts: tuple[Alert, ...], rule: str) -> list[Alert]:
    return [a for a in alerts if a.rule == rule]


def test_critical_xid_is_crit_and_names_gpu_code_and_meaning() -> None:
    (alert,) = only(derive_alerts(inputs(100.0, (gpu(xid_last=79, xid_at=40.0),)), T), "xid")
    assert alert.severity is Severity.CRITICAL and alert.target == "node-a/gpu3"
    assert "XID 79" in alert.message and "fallen off the bus" in alert.message
    assert UUID in alert.message and "1m ago" in alert.message  # coarse: it grows every tick
    # as old as the error, not as this console's first sight of it (the panel's age column)
    assert alert.since == 40.0


def test_other_xids_warn_and_the_critical_list_is_a_setting() -> None:
    thirteen = (gpu(xid_last=13, xid_at=90.0),)
    (alert,) = only(derive_alerts(inputs(100.0, thirteen), T), "xid")
    assert alert.severity is Severity.WARNING and "graphics engine exception" in alert.message
    strict = replace(T, critical_xids=(13,))
    (alert,) = only(derive_alerts(inputs(100.0, thirteen), strict), "xid")
    assert alert.severity is Severity.CRITICAL


def test_old_xid_no_xid_and_dcgm_zero_raise_nothing_but_dcgm_without_time_does() -> None:
    old = gpu(xid_last=79, xid_at=0.0)
    assert not only(derive_alerts(inputs(T.xid_alert_s + 1.0, (old,)), T), "xid")
    assert not only(derive_alerts(inputs(10.0, (gpu(xid_watched=True),)), T), "xid")
    assert not only(derive_alerts(inputs(10.0, (gpu(xid_last=0),)), T), "xid")
    (alert,) = only(derive_alerts(inputs(10.0, (gpu(xid_last=48),)), T), "xid")
    assert alert.severity is Severity.CRITICAL and "ago" not in alert.message
    assert alert.since == 10.0  # undated: since this console saw it


def test_thermal_slowdown_warns_with_the_temperature() -> None:
    hot = gpu(thermal_slowdown=True, temperature_c=91.0)
    (alert,) = only(derive_alerts(inputs(5.0, (hot,)), T), "thermal")
    assert alert.severity is Severity.WARNING and "91°C" in alert.message
    assert not only(derive_alerts(inputs(5.0, (gpu(thermal_slowdown=False),)), T), "thermal")


def power_history(key: str, values: Sequence[float | None]) -> History:
    h = History(capacity=200)
    for i, v in enumerate(values):
        h = h.append(float(i), {f"gpu:{UUID}:{key}": v})
    return h


def test_power_at_its_limit_for_a_while_warns() -> None:
    at_limit = gpu(power_w=693.0, power_limit_w=700.0)
    steady = power_history("power_pct", [99.0] * 12)
    (alert,) = only(derive_alerts(inputs(11.0, (at_limit,), history=steady), T), "power_limit")
    assert alert.severity is Severity.WARNING and alert.target == "node-a/gpu3"
    assert "693/700 W" in alert.message
    brief = power_history("power_pct", [60.0] * 6 + [99.0] * 6)
    assert not only(derive_alerts(inputs(11.0, (at_limit,), history=brief), T), "power_limit")


def test_power_capped_for_a_while_warns_even_below_the_percent() -> None:
    capped = gpu(power_w=600.0, power_limit_w=700.0, power_capped=True)
    history = power_history("power_capped", [1.0] * 12)
    (alert,) = only(derive_alerts(inputs(11.0, (capped,), history=history), T), "power_limit")
    assert "power capped" in alert.message
    flapping = power_history("power_capped", [1.0, 0.0] * 6)
    assert not only(derive_alerts(inputs(11.0, (capped,), history=flapping), T), "power_limit")


def test_mig_pending_is_tracked_from_first_seen_and_alerts_past_its_limit() -> None:
    pending = {"n1": NodeInfo("n1", mig_config="all-1g.10gb", mig_config_state="pending")}
    since = track_mig_pending({}, pending, 1000.0)
    assert since == {"n1": 1000.0}
    since = track_mig_pending(since, pending, 1200.0)
    assert since == {"n1": 1000.0}  # carried over, not restarted

    def alerts(now: float) -> list[Alert]:
        return only(
            derive_alerts(inputs(now, nodes=pending, mig_pending_since=since), T), "mig_config"
        )

    assert not alerts(1000.0 + T.mig_pending_for_s - 1)
    (alert,) = alerts(1000.0 + T.mig_pending_for_s)
    assert alert.severity is Severity.WARNING and alert.target == "n1"
    assert "all-1g.10gb" in alert.message and "pending" in alert.message
    done = {"n1": NodeInfo("n1", mig_config="all-1g.10gb", mig_config_state="success")}
    assert track_mig_pending(since, done, 1400.0) == {}


def test_mig_failed_is_crit_at_once() -> None:
    failed = {"n2": NodeInfo("n2", mig_config="all-balanced", mig_config_state="failed")}
    (alert,) = only(derive_alerts(inputs(1.0, nodes=failed), T), "mig_config")
    assert alert.severity is Severity.CRITICAL and "failed" in alert.message


def test_thresholds_come_from_the_config(tmp_path: Path) -> None:
    path = tmp_path / "config.toml"
    path.write_text(
        "[fleets.p.redis]\n[alerts]\ncritical_xids = [79, 119]\nmig_pending_for_s = 120\n"
        "power_limit_pct = 95\npower_limit_for_s = 30\nxid_alert_s = 600\n"
    )
    alerts = load_config(path, env={}).alerts
    assert alerts.critical_xids == (79, 119) and alerts.mig_pending_for_s == 120.0
    assert (alerts.power_limit_pct, alerts.power_limit_for_s) == (95.0, 30.0)
    assert alerts.xid_alert_s == 600.0
    path.write_text("[fleets.p.redis]\n[alerts]\ncritical_xids = ['79']\n")
    try:
        load_config(path, env={})
    except ValueError as exc:
        assert "alerts.critical_xids[0]" in str(exc) and "an integer" in str(exc)
    else:
        raise AssertionError("a non-integer XID was accepted")
