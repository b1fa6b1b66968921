"""A fleet whose slots only the registry names (as ``gpucon lab`` runs it: a real
redis-server, no GPU source): the status bar counts the slots the table shows, HOST comes from
the slot id, and at 80 columns the rows can still be told apart."""

from __future__ import annotations

from pathlib import Path

import pytest
import redis

from gpucon.app import GpuconApp
from gpucon.hub import Hub
from gpucon.sources.redisq import RedisQueueSource
from gpucon.widgets.status_bar import StatusBar
from gpucon.widgets.text_panel import TextPanel
from tests.helpers.servers import RedisProcess
from tests.ui.rig import table_lines

SLOTS = ("lab/gpu0/gi1", "lab/gpu0/gi2", "lab/gpu0/gi3")


@pytest.mark.parametrize("size", [(80, 24), (180, 48)])
async def test_registry_only_slots_are_counted_and_told_apart(
    tmp_path: Path, size: tuple[int, int]
) -> None:
    with RedisProcess(tmp_path) as server:
        seed = redis.Redis.from_url(server.url)
        seed.xgroup_create("gen:queue", "g1", id="$", mkstream=True)
        for i, slot in enumerate(SLOTS):
            seed.sadd("gpucon:backends", f"lab-b{i}")
            seed.hset(f"gpucon:backend:lab-b{i}",
                      mapping={"slot": slot, "state": "active", "weight": "1",
                               "inflight": "0"})  # fmt: skip
        seed.close()
        source = RedisQueueSource(server.url, streams=("gen:queue",), group="g1", timeout_s=1.0)
        hub = Hub([source], refresh_s=1.0)
        try:
            hub.poll_once()
            snap = hub.tick()
        finally:
            source.close()
    assert not snap.slots and len(snap.backends) == 3  # only the registry names the slots

    app = GpuconApp(hub, autostart=False, mode="live", read_only=True)
    async with app.run_test(size=size) as pilot:
        await pilot.pause()
        bar = app.screen.query_one(StatusBar).render_line(0).text
        assert "0 GPUs 3 slots" in bar, bar  # not "0 slots" beside three rows
        lines = table_lines(app)
        for i, slot in enumerate(SLOTS):
            row = next(line for line in lines if f"lab-b{i}" in line)
            assert row.startswith("lab "), row  # HOST from the id, not n/a
            gi = slot.rsplit("/", 1)[1]
            # GPU and SLOT from the id: "0 gi1" side by side, or "0/gi1" once GPU is dropped
            assert f"0/{gi}" in row or (" 0 " in row and f" {gi} " in row), row
        # its detail says why there are no facts: only the registry names the slot (it said
        # "gone, or its source is down" with every source up)
        app.open_detail(SLOTS[0])
        await pilot.pause()
        info = app.screen.query_one("#detail-info", TextPanel)
        head = " ".join(info.render_line(y).text for y in range(2))
        assert "no GPU source (NVML, DCGM or libvirt) reports this slot" in head, head
        assert "gone" not in head and "down" not in head, head
        assert "the registry places lab-b0 on it" in " ".join(head.split()) or size[0] < 120
