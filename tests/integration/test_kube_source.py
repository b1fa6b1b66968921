"""KubeSource (official client) against the stand-in Kubernetes API server: list, then watch."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from gpucon.model.fleet import Backend, BackendState, Health, Slot, SlotKind
from gpucon.model.merge import merge_readings
from gpucon.model.reading import Reading
from gpucon.sources.base import Source
from gpucon.sources.kube import KubeSource
from tests.helpers.kube_standin import KubeStandIn, RecordedRequest
from tests.helpers.servers import free_port, wait_until

pytestmark = pytest.mark.integration

MIG = "nvidia.com/mig-3g.40gb"


def populate(standin: KubeStandIn) -> None:
    """Two GPU nodes, a CPU node, GPU pods following the gpucon convention and others."""
    standin.add_node(
        "gpu-a",
        labels={"nvidia.com/mig.config": "all-3g.40gb", "nvidia.com/mig.config.state": "success"},
        allocatable={MIG: "2", "cpu": "64", "memory": "512Gi"},
    )
    standin.add_node("gpu-b", allocatable={"nvidia.com/gpu": "8"}, unschedulable=True)
    standin.add_node("cpu-a", allocatable={"cpu": "32"})
    standin.add_pod(
        "ml",
        "llm-a-0",
        "gpu-a",
        {MIG: "1"},
        labels={"gpucon.io/backend": "llm-a", "app": "llm"},
        annotations={"gpucon.io/slot": "gpu-a/gpu0/gi1"},
        pod_ip="10.1.0.5",
    )
    standin.add_pod("ml", "batch-0", "gpu-b", {"nvidia.com/gpu": "2"}, labels={"app": "batch"})
    standin.add_pod("web", "frontend-0", "cpu-a", {"cpu": "1"})


@pytest.fixture
def standin() -> Iterator[KubeStandIn]:
    server = KubeStandIn().start()
    populate(server)
    yield server
    server.stop()


@pytest.fixture
def kubeconfig(standin: KubeStandIn, tmp_path: Path) -> str:
    return str(standin.write_kubeconfig(tmp_path / "kubeconfig"))


@pytest.fixture
def source(kubeconfig: str) -> Iterator[KubeSource]:
    src = KubeSource(kubeconfig=kubeconfig, timeout_s=5.0, watch_timeout_s=30.0, backoff_s=0.1)
    yield src
    src.close()


def lists(standin: KubeStandIn) -> list[RecordedRequest]:
    return [r for r in standin.recorded("GET") if not r.is_watch]


def watches(standin: KubeStandIn) -> list[RecordedRequest]:
    return [r for r in standin.recorded("GET") if r.is_watch]


def read_until(
    source: KubeSource, check: Callable[[Reading], bool], timeout_s: float = 5.0
) -> Reading:
    deadline = time.monotonic() + timeout_s
    while True:
        reading = source.read()
        if check(reading) or time.monotonic() > deadline:
            return reading
        time.sleep(0.02)


def pod_refs(reading: Reading) -> set[str]:
    return {p for n in reading.nodes for p in n.gpu_pods}


def test_lists_nodes_and_gpu_pods_then_watches(source: KubeSource, standin: KubeStandIn) -> None:
    assert isinstance(source, Source)
    reading = source.read()
    assert reading.health is Health.OK, reading.error
    nodes = {n.name: n for n in reading.nodes}
    assert set(nodes) == {"gpu-a", "gpu-b"}  # the CPU node is not a GPU node
    assert nodes["gpu-a"].mig_config == "all-3g.40gb"
    assert nodes["gpu-a"].mig_config_state == "success"
    assert nodes["gpu-a"].allocatable == ((MIG, "2"),)
    assert nodes["gpu-a"].unschedulable is False
    assert nodes["gpu-a"].gpu_pods == ("ml/llm-a-0",)
    assert nodes["gpu-b"].unschedulable is True
    assert nodes["gpu-b"].allocatable == (("nvidia.com/gpu", "8"),)
    assert nodes["gpu-b"].gpu_pods == ("ml/batch-0",)

    (backend,) = reading.backends
    assert (backend.name, backend.pod, backend.node) == ("llm-a", "ml/llm-a-0", "gpu-a")
    assert backend.slot_id == "gpu-a/gpu0/gi1"
    (slot,) = reading.slots
    assert slot.id == "gpu-a/gpu0/gi1" and slot.kind is SlotKind.MIG
    assert (slot.host, slot.gpu_index, slot.gi_id) == ("gpu-a", 0, 1)
    assert (slot.pod, slot.node, slot.profile) == ("ml/llm-a-0", "gpu-a", "3g.40gb")

    assert sorted(r.path for r in lists(standin)) == ["/api/v1/nodes", "/api/v1/pods"]
    wait_until(lambda: len(watches(standin)) == 2, what="the two watches")
    watch_from = {r.path: r.query.get("resourceVersion") for r in watches(standin)}
    assert set(watch_from) == {"/api/v1/nodes", "/api/v1/pods"}
    assert all(v and v.isdigit() for v in watch_from.values())  # from the list's version
    assert reading.round_trips + source.read().round_trips == 4  # two LISTs, two WATCHes


def test_watch_events_reach_the_next_read_without_polling(
    source: KubeSource, standin: KubeStandIn
) -> None:
    source.read()
    standin.add_pod(
        "ml",
        "llm-b-0",
        "gpu-a",
        {MIG: "1"},
        labels={"gpucon.io/backend": "llm-b"},
        pod_ip="10.1.0.6",
    )
    added = read_until(source, lambda r: "ml/llm-b-0" in pod_refs(r))
    assert "llm-b" in {b.name for b in added.backends}

    standin.update_pod("ml", "llm-b-0", {"metadata": {"labels": {"gpucon.io/backend": "llm-c"}}})
    modified = read_until(source, lambda r: "llm-c" in {b.name for b in r.backends})
    assert {b.name for b in modified.backends} == {"llm-a", "llm-c"}

    standin.delete_pod("ml", "llm-b-0")
    deleted = read_until(source, lambda r: "ml/llm-b-0" not in pod_refs(r))
    assert {b.name for b in deleted.backends} == {"llm-a"}

    standin.update_node("gpu-a", {"spec": {"unschedulable": True}})
    standin.update_node(
        "gpu-a", {"metadata": {"labels": {"nvidia.com/mig.config.state": "pending"}}}
    )
    cordoned = read_until(source, lambda r: any(n.mig_config_state == "pending" for n in r.nodes))
    gpu_a = next(n for n in cordoned.nodes if n.name == "gpu-a")
    assert gpu_a.unschedulable is True

    steady = [source.read() for _ in range(20)]
    assert all(r.round_trips == 0 for r in steady)
    assert len(lists(standin)) == 2  # still only the initial LIST of nodes and of pods
    assert len(watches(standin)) == 2  # and the one watch of each


def test_a_watch_that_ends_resumes_from_its_version_without_a_list(
    source: KubeSource, standin: KubeStandIn
) -> None:
    source.read()
    wait_until(lambda: len(watches(standin)) == 2, what="the two watches")
    # both streams begun, so the drop ends both (a request counted but not yet streaming, on
    # a loaded machine, was not ended, and only one watch resumed)
    wait_until(lambda: standin.watch_streams_begun == 2, what="the two watch streams")
    standin.drop_watches()
    standin.add_pod("ml", "llm-d-0", "gpu-a", {MIG: "1"}, labels={"gpucon.io/backend": "llm-d"})
    reading = read_until(source, lambda r: "ml/llm-d-0" in pod_refs(r))
    assert reading.health is Health.OK
    assert "ml/llm-d-0" in pod_refs(reading)
    wait_until(lambda: len(watches(standin)) == 4, what="the two resumed watches")
    assert len(lists(standin)) == 2
    resumed = [r.query["resourceVersion"] for r in watches(standin)[2:]]
    assert all(int(v) > 1000 for v in resumed)


def test_410_gone_re_lists(source: KubeSource, standin: KubeStandIn) -> None:
    source.read()
    wait_until(lambda: len(watches(standin)) == 2, what="the two watches")
    standin.expire_resource_versions()  # ends the watches; their versions are now too old
    standin.add_pod("ml", "llm-e-0", "gpu-a", {MIG: "1"}, labels={"gpucon.io/backend": "llm-e"})
    reading = read_until(source, lambda r: "llm-e" in {b.name for b in r.backends})
    assert reading.health is Health.OK, reading.error
    assert "llm-e" in {b.name for b in reading.backends}
    assert sorted(r.path for r in lists(standin)) == [
        "/api/v1/nodes",
        "/api/v1/nodes",
        "/api/v1/pods",
        "/api/v1/pods",
    ]


def test_api_server_down_is_degraded_with_last_data_then_recovers(
    source: KubeSource, standin: KubeStandIn, tmp_path: Path
) -> None:
    assert source.read().health is Health.OK
    standin.stop()
    down = read_until(source, lambda r: r.health is not Health.OK)
    assert down.health is Health.DEGRADED
    assert down.error is not None and "retry in" in down.error
    assert {n.name for n in down.nodes} == {"gpu-a", "gpu-b"}  # the last known state, marked stale
    t0 = time.perf_counter()
    source.read()
    assert time.perf_counter() - t0 < 0.5  # reading never waits on the dead server

    with KubeStandIn(port=standin.port) as again:  # the API server comes back
        populate(again)
        again.add_pod("ml", "llm-f-0", "gpu-a", {MIG: "1"}, labels={"gpucon.io/backend": "llm-f"})
        recovered = read_until(source, lambda r: r.health is Health.OK, timeout_s=10.0)
        assert recovered.health is Health.OK, recovered.error
        assert "llm-f" in {b.name for b in recovered.backends}
        assert {r.path for r in lists(again)} == {"/api/v1/nodes", "/api/v1/pods"}


def test_unreachable_api_server_is_down_not_an_exception(tmp_path: Path) -> None:
    dead = KubeStandIn(port=free_port())  # never started: nothing listens there
    path = dead.write_kubeconfig(tmp_path / "kubeconfig")
    src = KubeSource(kubeconfig=str(path), timeout_s=1.0, backoff_s=0.1)
    try:
        reading = src.read()
    finally:
        src.close()
    assert reading.health is Health.DOWN
    assert reading.error is not None and "initial list" in reading.error
    assert f"cannot reach 127.0.0.1:{dead.port}: Connection refused" in reading.error
    assert reading.nodes == () and reading.backends == ()


def test_missing_kubeconfig_is_down_with_the_path(tmp_path: Path) -> None:
    src = KubeSource(kubeconfig=str(tmp_path / "nope"), timeout_s=1.0)
    reading = src.read()
    src.close()
    assert reading.health is Health.DOWN
    assert reading.error is not None and "kubeconfig" in reading.error


def test_namespace_scoped_source_watches_only_that_namespace(
    kubeconfig: str, standin: KubeStandIn
) -> None:
    standin.add_pod("other", "x-0", "gpu-a", {MIG: "1"}, labels={"gpucon.io/backend": "x"})
    src = KubeSource(kubeconfig=kubeconfig, namespace="ml", timeout_s=5.0)
    try:
        reading = src.read()
    finally:
        src.close()
    assert {b.name for b in reading.backends} == {"llm-a"}
    assert {r.path for r in standin.recorded("GET")} == {
        "/api/v1/nodes",
        "/api/v1/namespaces/ml/pods",
    }


def test_malformed_slot_annotation_maps_to_no_slot(
    source: KubeSource, standin: KubeStandIn
) -> None:
    standin.add_pod(
        "ml",
        "odd-0",
        "gpu-a",
        {MIG: "1"},
        labels={"gpucon.io/backend": "odd"},
        annotations={"gpucon.io/slot": "not a slot id\x1b[31m"},
    )
    reading = read_until(source, lambda r: "odd" in {b.name for b in r.backends})
    odd = next(b for b in reading.backends if b.name == "odd")
    assert odd.slot_id is None
    assert {s.id for s in reading.slots} == {"gpu-a/gpu0/gi1"}


def test_close_stops_the_watch_threads(kubeconfig: str) -> None:
    src = KubeSource(kubeconfig=kubeconfig, timeout_s=5.0, watch_timeout_s=300.0)
    assert src.read().health is Health.OK
    threads = [w.thread for w in src._watched]
    t0 = time.perf_counter()
    src.close()
    assert time.perf_counter() - t0 < 2.0
    assert not any(t.is_alive() for t in threads)


def test_pod_slot_fragment_joins_the_nvml_slot_of_the_same_id(source: KubeSource) -> None:
    nvml = Reading(
        "nvml",
        Health.OK,
        0.0,
        slots=(
            Slot(
                "gpu-a/gpu0/gi1",
                SlotKind.MIG,
                host="gpu-a",
                gpu_uuid="GPU-aaaa",
                gi_id=1,
                mem_used_mib=512.0,
            ),
        ),
    )
    kube = source.read()
    for order in ([nvml, kube], [kube, nvml]):
        merged = merge_readings(order)
        slot = merged.slots["gpu-a/gpu0/gi1"]
        assert (slot.gpu_uuid, slot.mem_used_mib) == ("GPU-aaaa", 512.0)  # from NVML
        assert (slot.pod, slot.node) == ("ml/llm-a-0", "gpu-a")  # from Kubernetes
        assert merged.origins["slot:gpu-a/gpu0/gi1"] == {"nvml", "kube"}


def test_backend_without_label_gets_its_pod_by_ip(source: KubeSource, standin: KubeStandIn) -> None:
    standin.add_pod("ml", "plain-0", "gpu-a", {MIG: "1"}, pod_ip="10.1.0.9")  # no gpucon label
    kube = read_until(source, lambda r: "ml/plain-0" in pod_refs(r))
    gpu_a = next(n for n in kube.nodes if n.name == "gpu-a")
    assert ("10.1.0.9", "ml/plain-0") in gpu_a.gpu_pod_ips
    registry = Reading(
        "redis",
        Health.OK,
        0.0,
        backends=(
            Backend("plain", url="http://10.1.0.9:8000", state=BackendState.DRAINING),
            Backend("elsewhere", url="http://10.9.9.9:8000"),
        ),
    )
    merged = merge_readings([registry, kube])
    plain = merged.backends["plain"]
    assert (plain.pod, plain.node, plain.state) == ("ml/plain-0", "gpu-a", BackendState.DRAINING)
    assert merged.backends["elsewhere"].pod is None
    assert merged.backends["llm-a"].pod == "ml/llm-a-0"  # matched by its label


def test_finished_pods_hold_no_gpu(source: KubeSource, standin: KubeStandIn) -> None:
    source.read()
    standin.update_pod("ml", "batch-0", {"status": {"phase": "Succeeded"}})
    reading = read_until(source, lambda r: "ml/batch-0" not in pod_refs(r))
    assert pod_refs(reading) == {"ml/llm-a-0"}


def test_importing_the_modules_does_not_import_the_clients() -> None:
    """The client costs ~0.15-0.6 s to import: only the watch threads may pay it."""
    code = (
        "import sys, gpucon.sources.kube, gpucon.controls.kube, gpucon.sources.libvirt_source; "
        "print(sorted(m for m in ('kubernetes', 'libvirt') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_malformed_objects_are_skipped_and_reported_never_fatal(
    source: KubeSource, standin: KubeStandIn
) -> None:
    source.read()
    standin.update_node("gpu-a", {"metadata": {"labels": ["not", "a", "map"]}})
    standin.add_pod("ml", "weird-0", "gpu-a", None)
    standin.update_pod("ml", "weird-0", {"spec": {"containers": "garbage"}})
    bad = read_until(  # the node and pod watches are separate streams: wait for both
        source, lambda r: r.error is not None and "weird-0" in r.error and "gpu-a" in r.error
    )
    assert bad.health is Health.DEGRADED
    assert bad.error is not None
    assert "nodes: skipped 1 malformed: gpu-a" in bad.error
    assert "pods: skipped 1 malformed: ml/weird-0" in bad.error
    gpu_a = next(n for n in bad.nodes if n.name == "gpu-a")
    assert gpu_a.mig_config == "all-3g.40gb"  # the last good read of it, not dropped
    standin.add_pod("ml", "after-0", "gpu-b", {"nvidia.com/gpu": "1"})  # the watch still flows
    assert "ml/after-0" in pod_refs(read_until(source, lambda r: "ml/after-0" in pod_refs(r)))

    standin.update_node("gpu-a", {"metadata": {"labels": {"nvidia.com/mig.config": "all-1g.10gb"}}})
    standin.delete_pod("ml", "weird-0")
    good = read_until(source, lambda r: r.health is Health.OK)
    assert good.health is Health.OK, good.error
    assert next(n for n in good.nodes if n.name == "gpu-a").mig_config == "all-1g.10gb"


@pytest.mark.parametrize("nodes", [8, 512])
def test_reads_make_no_round_trip_whatever_the_fleet_size(tmp_path: Path, nodes: int) -> None:
    with KubeStandIn() as standin:
        for n in range(nodes):
            standin.add_node(f"gpu-{n}", allocatable={"nvidia.com/mig-1g.10gb": "7"})
            standin.add_pod(
                "ml",
                f"p-{n}",
                f"gpu-{n}",
                {"nvidia.com/mig-1g.10gb": "1"},
                {"gpucon.io/backend": f"b-{n}"},
            )
        src = KubeSource(kubeconfig=str(standin.write_kubeconfig(tmp_path / "kc")), timeout_s=10.0)
        try:
            first = src.read()
            wait_until(lambda: len(watches(standin)) == 2, what="the two watches")
            steady = [src.read() for _ in range(5)]
        finally:
            src.close()
    assert len(first.nodes) == nodes and len(first.backends) == nodes
    assert first.round_trips + steady[0].round_trips == 4  # LIST + WATCH of nodes and of pods
    assert [r.round_trips for r in steady[1:]] == [0, 0, 0, 0]


def test_refused_credentials_are_down_with_the_api_answer(
    standin: KubeStandIn, tmp_path: Path
) -> None:
    path = standin.write_kubeconfig(tmp_path / "kubeconfig")
    path.write_text(path.read_text().replace("stand-in-token", "stolen-token"))
    src = KubeSource(kubeconfig=str(path), timeout_s=2.0)
    try:
        reading = src.read()
    finally:
        src.close()
    assert reading.health is Health.DOWN
    assert reading.error is not None and "HTTP 401 Unauthorized" in reading.error


def test_a_watch_that_keeps_failing_backs_off_instead_of_polling(
    kubeconfig: str, standin: KubeStandIn
) -> None:
    standin.forbid_watches = True  # the LIST works, every WATCH is refused
    src = KubeSource(kubeconfig=kubeconfig, timeout_s=5.0, backoff_s=0.05, backoff_max_s=5.0)
    try:
        reading = src.read()
        wait_until(lambda: len(watches(standin)) >= 2, what="the first watches")
        time.sleep(1.0)
        # a LIST that works clears the error for the moment until its WATCH fails again
        reading = read_until(src, lambda r: r.health is Health.DEGRADED)
    finally:
        src.close()
    assert reading.health is Health.DEGRADED
    assert reading.error is not None and "HTTP 403 Forbidden" in reading.error
    # backoff 0.05, 0.1, 0.2, 0.4 s ...: a handful of LISTs per resource in a second, not 20
    assert len(lists(standin)) <= 2 * 6


@pytest.mark.parametrize("bookmarked", [True, False])
def test_bookmarks_keep_a_quiet_pod_watch_current_across_a_compaction(
    source: KubeSource, standin: KubeStandIn, bookmarked: bool
) -> None:
    """Only nodes change; the pod watch hears nothing but, asked for bookmarks, still learns
    the new resourceVersion, so a compaction just behind it costs no new LIST of pods."""
    assert source.read().health is Health.OK
    wait_until(lambda: len(watches(standin)) == 2, what="the two watches")
    assert all(r.query.get("allowWatchBookmarks") == "true" for r in watches(standin))
    for i in range(3):
        standin.update_node("gpu-a", {"metadata": {"labels": {"turn": str(i)}}})
    latest = standin.resource_version
    if bookmarked:
        standin.send_bookmarks()
        wait_until(
            lambda: ("pods", latest) in standin.bookmarks_sent, what="a bookmark for the pods"
        )
    standin.expire_resource_versions(up_to=latest - 1)  # ends the watches, as compaction may
    wait_until(lambda: len(watches(standin)) + len(lists(standin)) >= 5, what="the resumed watch")
    standin.add_pod("ml", "llm-f-0", "gpu-a", {MIG: "1"}, labels={"gpucon.io/backend": "llm-f"})
    reading = read_until(source, lambda r: "llm-f" in {b.name for b in r.backends})
    assert reading.health is Health.OK, reading.error
    pod_lists = [r for r in lists(standin) if r.path == "/api/v1/pods"]
    pod_watches = [r for r in watches(standin) if r.path == "/api/v1/pods"]
    if bookmarked:
        assert len(pod_lists) == 1  # resumed from the bookmark's version: no 410, no LIST
        assert pod_watches[-1].query["resourceVersion"] == str(latest)
    else:
        assert len(pod_lists) == 2  # its version was compacted away: 410, then a new LIST
