"""GPU health and Kubernetes node state on screen, driven with Pilot: the GPU/node panel of the
fleet screen (under the queues), the slot detail, the REQ/S window in the table header."""

from __future__ import annotations

from dataclasses import dataclass

from msgspec.structs import replace

from gpucon.model.fleet import NodeInfo
from gpucon.model.reading import Reading
from gpucon.screens.detail import DetailScreen
from gpucon.widgets.health_panel import NO_GPU_SOURCE
from tests.ui.fleet_fixture import HandSource
from tests.ui.rig import Rig, table_lines

SIZE = (160, 45)
NODES = (
    NodeInfo("gpu-a", mig_config="all-3g.40gb", mig_config_state="success"),
    NodeInfo("gpu-b", mig_config="all-balanced", mig_config_state="pending", unschedulable=True),
    NodeInfo("gpu-c", mig_config="all-1g.10gb", mig_config_state="failed"),
)


def troubled_rig() -> Rig:
    return Rig(source=HandSource(gpu_trouble=True, nodes=NODES), rate_window="1m")


def panel_text(app: object, selector: str) -> str:
    return str(app.screen.query_one(selector).render())  # type: ignore[attr-defined]


async def test_gpu_panel_shows_health_troubled_first_and_nodes() -> None:
    app = troubled_rig().app(warmup=20)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        lines = panel_text(app, "#health").splitlines()
        assert lines[0].split() == ["GPU", "TEMP", "POWER", "UTIL", "XID"]
        # the sick A100 first: XID 79 seen 18 s ago (shown in 10 s steps), hot, at its power cap
        sick = lines[1]
        assert sick.startswith("gpu-b/gpu0")
        assert "88°C" in sick and "398/400W" in sick and "79 15s" in sick
        assert "THERM" in sick and "PCAP" in sick
        healthy = next(line for line in lines if line.startswith("gpu-a/gpu1"))
        assert "55°C" in healthy and "512/700W" in healthy and "none" in healthy
        assert "THERM" not in healthy and "PCAP" not in healthy
        # the A100s report no utilisation: n/a, never 0
        assert "n/a" in next(line for line in lines if line.startswith("gpu-a/gpu0"))
        # nodes: failed first, then pending (at least how long: pending at the first look),
        # cordon shown
        at = lines.index(next(line for line in lines if line.startswith("NODE")))
        nodes = lines[at + 1 :]
        assert nodes[0].split()[:3] == ["gpu-c", "all-1g.10gb", "failed"]
        assert nodes[1].startswith("gpu-b") and "pending ≥15s" in nodes[1]
        assert "CORDONED" in nodes[1] and "sched" in nodes[2]
        alerts = panel_text(app, "#alerts")
        assert "gpu-b/gpu0" in alerts and "XID 79" in alerts
        assert "MIG reconfiguration to all-1g.10gb failed" in alerts
        assert app.snapshot is not None
        by_rule = {(a.rule, a.target): a for a in app.snapshot.alerts}
        assert "thermal slowdown at 88°C" in by_rule["thermal", "gpu-b/gpu0"].message
        assert ("power_limit", "gpu-b/gpu0") in by_rule
        assert ("mig_config", "gpu-b") not in by_rule  # pending 19 s: within its 300 s


async def test_detail_shows_the_slots_gpu_health_and_its_node() -> None:
    app = troubled_rig().app(warmup=20)
    async with app.run_test(size=(160, 60)) as pilot:
        app.open_detail("gpu-b/gpu0/gi1")
        await pilot.pause()
        assert isinstance(app.screen, DetailScreen)
        text = panel_text(app, "#detail-health")
        assert "88°C" in text
        assert "398/400W (100% of limit)" in text
        assert "XID 79 (GPU has fallen off the bus), 15s ago" in text
        assert "held down by thermal slowdown and power cap" in text
        assert "all-balanced" in text and "pending ≥15s" in text  # pending at the first look
        assert "CORDONED (unschedulable)" in text
        await pilot.press("escape")
        app.open_detail("vm:vm-gpu-a-1")  # a VM: no source reports its GPU's health
        await pilot.pause()
        text = panel_text(app, "#detail-health")
        assert "n/a: no source reports this slot's GPU" in text


async def test_req_s_header_names_the_rate_window() -> None:
    app = troubled_rig().app(warmup=3)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        assert "REQ/S 1m" in table_lines(app)[0]
    plain = Rig().app(warmup=3)  # no rate source says its window: the bare title
    async with plain.run_test(size=SIZE) as pilot:
        await pilot.pause()
        header = table_lines(plain)[0]
        assert "REQ/S" in header and "REQ/S 1m" not in header


async def test_gpu_panel_sits_under_the_queues_and_leaves_the_alerts_their_width() -> None:
    app = troubled_rig().app(warmup=3)
    async with app.run_test(size=(160, 30)) as pilot:
        await pilot.pause()
        queues = app.screen.query_one("#queues").region
        health = app.screen.query_one("#health").region
        alerts = app.screen.query_one("#alerts").region
        assert health.y > queues.y and health.x == queues.x and health.width == queues.width
        assert health.height >= 6  # a header and GPUs, a header and nodes
        assert alerts.x >= queues.right and alerts.width >= 80
        assert "gpu-b/gpu0" in panel_text(app, "#health")


async def test_narrow_terminal_gives_the_alerts_the_width_and_the_queues_one_line() -> None:
    for width in (100, 80, 60):
        app = troubled_rig().app(warmup=3)
        async with app.run_test(size=(width, 24)) as pilot:
            await pilot.pause()
            queues = app.screen.query_one("#queues").region
            alerts = app.screen.query_one("#alerts").region
            assert queues.height == 1 and queues.y > alerts.y
            assert alerts.width >= width - 2  # the whole width, less the padding
            text = panel_text(app, "#alerts")
            # each alert's whole line: severity, target and what is wrong
            assert "CRIT" in text and "gpu-b/gpu0" in text and "XID 79" in text


async def test_node_names_and_labels_render_literally() -> None:
    hostile = NodeInfo(
        "[bold red]evil[/]\x1b[2J", mig_config="[link=x]cfg[/link]", mig_config_state="\x07pending"
    )
    app = Rig(source=HandSource(nodes=(hostile,))).app(warmup=3)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        text = panel_text(app, "#health")
        assert "[bold red]evil[/]" in text and "[link=x]cfg[/" in text  # cut to its column
        assert "\x1b" not in text and "\x07" not in text


async def test_many_gpus_show_the_troubled_first_and_say_how_many_more() -> None:
    app = Rig(source=HandSource(hosts=4, gpu_trouble=True)).app(warmup=3)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        lines = panel_text(app, "#health").splitlines()
        assert len(lines) <= app.screen.query_one("#health").content_size.height
        troubled = [line for line in lines[1:] if "THERM" in line]
        assert len(troubled) == 4 and lines[1:5] == troubled  # gpu-b of each copy, first
        assert lines[-1].startswith("… and ") and lines[-1].endswith(" more GPUs")
        shown = len(lines) - 2
        assert int(lines[-1].split()[2]) == 12 - shown


@dataclass
class NoGpuSource(HandSource):
    """Backends, latency and a queue, but no GPU source (the lab: Triton and Redis only)."""

    def read(self) -> Reading:
        return replace(super().read(), gpus=())


async def test_with_no_gpu_source_the_panel_is_one_line_that_says_so() -> None:
    app = Rig(source=NoGpuSource()).app(warmup=3)
    async with app.run_test(size=(160, 30)) as pilot:
        await pilot.pause()
        health = app.screen.query_one("#health")
        assert panel_text(app, "#health") == NO_GPU_SOURCE
        assert health.content_region.height == 1  # not a header over an empty list
        assert app.screen.query_one("#queues").region.y < health.region.y
