"""Staleness of every value: the two-cadence rule, which source gave each field, history gaps,
and how ``gpucon snapshot --json`` says which values are stale."""

from __future__ import annotations

from gpucon.commands.snapshot_render import snapshot_document
from gpucon.hub import Hub
from gpucon.model.fleet import Backend, Health, LatencyStats, QueueStats, Slot, SlotKind
from gpucon.model.reading import Reading
from gpucon.model.staleness import Staleness, stale_after_s


class Clock:
    def __init__(self) -> None:
        self.t = 5000.0

    def __call__(self) -> float:
        return self.t


class Scripted:
    """A source that returns what the test sets in ``reading`` (taken now), or fails."""

    def __init__(self, name: str, clock: Clock, cadence_s: float) -> None:
        self.name = name
        self.clock = clock
        self.cadence_s = cadence_s
        self.timeout_s = cadence_s
        self.fragments: dict[str, object] = {}
        self.down = False

    def read(self) -> Reading:
        if self.down:
            return Reading(self.name, Health.DOWN, self.clock(), error="refused")
        return Reading(self.name, Health.OK, self.clock(), **self.fragments)  # type: ignore[arg-type]

    def close(self) -> None:
        pass


def fleet(clock: Clock) -> tuple[Hub, Scripted, Scripted]:
    """NVML-like (memory, cadence 1 s) and Prometheus-like (activity and latency, cadence 5 s)
    sources of the same slot, and a Redis-like registry row inside the Prometheus one."""
    nvml = Scripted("nvml", clock, 1.0)
    nvml.fragments = {
        "slots": (Slot("h/gpu0", SlotKind.GPU, gpu_uuid="G0", mem_used_mib=1000.0),),
    }
    prom = Scripted("prometheus", clock, 5.0)
    prom.fragments = {
        "slots": (
            Slot("h/gpu0", SlotKind.GPU, gpu_uuid="G0", activity_pct=40.0, mem_used_mib=9.0),
        ),
        "backends": (Backend("b0", slot_id="h/gpu0", url="http://10.0.0.1:8000"),),
        "latency": (LatencyStats("10.0.0.1:8000", req_per_s=20.0, p95_ms=1840.0),),
        "queues": (QueueStats("gen:queue", length=4, lag=1, pending=2),),
    }
    hub = Hub([nvml, prom], clock=clock)
    return hub, nvml, prom


def poll(hub: Hub, *sources: Scripted) -> None:
    for s in sources:
        hub.record(s.read())


def test_a_value_goes_stale_after_two_cadences_of_its_own_source() -> None:
    clock = Clock()
    hub, nvml, prom = fleet(clock)
    poll(hub, nvml, prom)
    assert not hub.tick().staleness
    clock.t += stale_after_s(prom.cadence_s)  # exactly two cadences: not yet
    poll(hub, nvml)
    assert not hub.tick().staleness
    clock.t += 0.5
    poll(hub, nvml)
    snap = hub.tick()
    assert snap.value_age("slot:h/gpu0", "activity_pct") == 10.5
    # memory came from NVML (first in priority, read just now): fresh on the same slot
    assert snap.value_age("slot:h/gpu0", "mem_used_mib") is None
    # the latency was scraped from host:port and resolved to b0; its rate is stale too
    assert snap.value_age("latency:b0", "req_per_s") == 10.5
    assert snap.value_age("latency:b0", "p95_ms") == 10.5
    assert snap.value_age("queue:gen:queue", "lag") == 10.5
    assert snap.is_stale("backend:b0") and snap.is_stale("slot:h/gpu0")
    assert snap.stale_sources() == {"prometheus"}
    assert snap.sources["prometheus"].stale_after_s == 10.0


def test_a_failed_read_makes_its_data_stale_at_once() -> None:
    clock = Clock()
    hub, nvml, prom = fleet(clock)
    poll(hub, nvml, prom)
    hub.tick()
    clock.t += 1.0
    nvml.down = True
    poll(hub, nvml, prom)
    snap = hub.tick()
    assert snap.value_age("slot:h/gpu0", "mem_used_mib") == 1.0
    assert snap.value_age("slot:h/gpu0", "activity_pct") is None  # Prometheus answered
    nvml.down = False
    poll(hub, nvml)
    assert not hub.tick().staleness


def test_history_has_a_gap_where_values_are_stale_and_resumes_when_fresh() -> None:
    clock = Clock()
    hub, nvml, prom = fleet(clock)
    for _ in range(2):
        poll(hub, nvml, prom)
        hub.tick()
        clock.t += 1.0
    prom.down = True
    poll(hub, nvml, prom)
    hub.tick()
    clock.t += 1.0
    prom.down = False
    poll(hub, nvml, prom)
    snap = hub.tick()
    assert snap.history.get("backend:b0:p95") == (1840.0, 1840.0, None, 1840.0)
    assert snap.history.get("backend:b0:rps") == (20.0, 20.0, None, 20.0)
    assert snap.history.get("slot:h/gpu0:activity") == (40.0, 40.0, None, 40.0)
    assert snap.history.get("slot:h/gpu0:mem_used") == (1000.0,) * 4  # NVML stayed fresh
    assert snap.history.get("queue:gen:queue:waiting") == (3.0, 3.0, None, 3.0)


def test_snapshot_json_says_which_values_are_stale_with_age_and_source() -> None:
    clock = Clock()
    hub, nvml, prom = fleet(clock)
    poll(hub, nvml, prom)
    hub.tick()
    clock.t += 45.0
    poll(hub, nvml)
    doc = snapshot_document(hub.tick(), "lab")
    (slot,) = doc["slots"]
    assert slot["stale"] is True and slot["age_s"] == 45.0
    assert slot["stale_fields"]["activity_pct"] == {"age_s": 45.0, "source": "prometheus"}
    assert "mem_used_mib" not in slot["stale_fields"]
    (lat,) = doc["latency"]
    assert lat["key"] == "b0" and lat["stale"] is True
    assert set(lat["stale_fields"]) == {"req_per_s", "p95_ms"}
    sources = {s["name"]: s for s in doc["sources"]}
    assert sources["prometheus"]["stale"] is True and sources["prometheus"]["age_s"] == 45.0
    assert sources["nvml"]["stale"] is False and sources["nvml"]["stale_after_s"] == 2.0
    clock.t += 1.0
    poll(hub, nvml, prom)
    fresh = snapshot_document(hub.tick(), "lab")
    assert not any(e["stale"] for kind in ("slots", "latency", "queues") for e in fresh[kind])
    assert fresh["slots"][0]["stale_fields"] == {}


def test_staleness_lookups() -> None:
    s = Staleness({"redis": 12.0}, {"backend:b0": {"weight": "redis", "state": "redis"}})
    assert s and s.age("backend:b0", "weight") == 12.0
    assert s.age("backend:b0", "url") is None and s.age("backend:b1", "weight") is None
    assert s.ages("backend:b0") == {"weight": 12.0, "state": 12.0}
    assert s.oldest("backend:b0") == 12.0 and s.oldest("slot:x") is None
    assert not Staleness()


def test_the_attribution_is_reused_while_nothing_it_depends_on_changed() -> None:
    clock = Clock()
    hub, nvml, prom = fleet(clock)
    poll(hub, nvml, prom)
    hub.tick()
    clock.t += 20.0
    poll(hub, nvml)
    first = hub.tick().staleness
    clock.t += 1.0
    poll(hub, nvml)  # a new NVML reading claiming the same fields: the same answer, reused
    second = hub.tick().staleness
    assert second.fields is first.fields and second.sources == {"prometheus": 21.0}
    # NVML now knows the activity too: it wins the field, which is fresh again
    nvml.fragments = {
        "slots": (
            Slot("h/gpu0", SlotKind.GPU, gpu_uuid="G0", mem_used_mib=1000.0, activity_pct=7.0),
        )
    }
    poll(hub, nvml)
    third = hub.tick()
    assert third.value_age("slot:h/gpu0", "activity_pct") is None
    assert third.slots["h/gpu0"].activity_pct == 7.0
    assert third.value_age("latency:b0", "p95_ms") == 21.0
