"""The simulated fleet behind ``gpucon demo`` and the UI tests.

``build_sim_fleet(seed, scenario, size)`` gives a ``SimFleet``; ``SCENARIOS`` names the
incidents it can start; ``DEMO_SLO_P95_MS`` is the p95 SLO per model to give the hub;
``DEMO_RATE_WINDOW`` the window its rates are smoothed over (shown with REQ/S).
"""

from gpucon.sim.catalog import DEMO_SLO_P95_MS
from gpucon.sim.fleet import SimFleet, build_sim_fleet
from gpucon.sim.metrics import STATS_TAU_S
from gpucon.sim.scenarios import SCENARIOS

# the simulator smooths per-backend rates with this time constant, as rate() over a window
DEMO_RATE_WINDOW = f"{STATS_TAU_S:.0f}s"

__all__ = ["DEMO_RATE_WINDOW", "DEMO_SLO_P95_MS", "SCENARIOS", "SimFleet", "build_sim_fleet"]
