"""The simulated fleet behind ``gpucon demo`` and the UI tests.

``build_sim_fleet(seed, scenario, size)`` gives a ``SimFleet``; ``SCENARIOS`` names the
incidents it can start; ``DEMO_SLO_P95_MS`` is the p95 SLO per model to give the hub.
"""

from gpucon.sim.catalog import DEMO_SLO_P95_MS
from gpucon.sim.fleet import SimFleet, build_sim_fleet
from gpucon.sim.scenarios import SCENARIOS

__all__ = ["DEMO_SLO_P95_MS", "SCENARIOS", "SimFleet", "build_sim_fleet"]
