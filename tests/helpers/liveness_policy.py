"""The liveness policy the unit tests judge backends under: short ages (an HTTP check 3 s,
Prometheus's ``up`` 15 s, the scheduler's verdict 5 s), so a test's clock stays small."""

from __future__ import annotations

from gpucon.model.liveness import LivenessPolicy

POLICY = LivenessPolicy(http_max_age_s=3.0, prom_max_age_s=15.0, registry_max_age_s=5.0)
