"""LibvirtSource against libvirt's real ``test:///`` driver loading tests/fixtures/libvirt XML."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import pytest

from gpucon.model.fleet import Health, SlotKind
from gpucon.sources.base import Source
from gpucon.sources.libvirt_source import LibvirtSource, parse_domain_xml
from tests.helpers.servers import wait_until

libvirt = pytest.importorskip("libvirt")

pytestmark = pytest.mark.integration

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "libvirt" / "gpu_host.xml"
URI = f"test://{FIXTURE}"


class CountingConnection:
    """A real libvirt connection that counts the calls made through it and its domains."""

    def __init__(self, conn: Any, corrupt_xml_of: str | None = None) -> None:
        self.conn = conn
        self.calls: dict[str, int] = {}
        self.corrupt_xml_of = corrupt_xml_of

    def _count(self, name: str) -> None:
        self.calls[name] = self.calls.get(name, 0) + 1

    def getAllDomainStats(self, flags: int = 0) -> list[tuple[Any, dict[str, Any]]]:
        self._count("getAllDomainStats")
        return [(CountingDomain(d, self), v) for d, v in self.conn.getAllDomainStats(flags)]

    def getHostname(self) -> str:
        self._count("getHostname")
        return str(self.conn.getHostname())

    def close(self) -> int:
        return int(self.conn.close())


class CountingDomain:
    def __init__(self, dom: Any, owner: CountingConnection) -> None:
        self.dom = dom
        self.owner = owner

    def name(self) -> str:
        return str(self.dom.name())

    def UUIDString(self) -> str:
        return str(self.dom.UUIDString())

    def ID(self) -> int:
        return int(self.dom.ID())

    def XMLDesc(self, flags: int = 0) -> str:
        self.owner._count("XMLDesc")
        if self.name() == self.owner.corrupt_xml_of:
            return "<domain><name>broken</name><devices><hostdev"
        return str(self.dom.XMLDesc(flags))


def _writable(opened: list[Any]) -> Any:
    def connect(uri: str) -> Any:
        conn = libvirt.open(uri)  # read-write, so the test can start and stop domains
        opened.append(conn)
        return conn

    return connect


def test_reads_domains_state_and_passed_through_gpus() -> None:
    source = LibvirtSource(URI, host="kvm-a")
    assert isinstance(source, Source)
    reading = source.read()
    source.close()
    assert reading.health is Health.OK, reading.error
    slots = {s.id: s for s in reading.slots}
    assert set(slots) == {"vm:vm-a-1", "vm:vm-a-2", "vm:vm-b-1", "vm:vm-c-1"}
    assert all(s.kind is SlotKind.VM and s.host == "kvm-a" for s in slots.values())

    a1 = slots["vm:vm-a-1"]
    assert a1.vm is not None
    assert a1.vm.state == "running"
    assert a1.vm.vcpus == 16
    assert a1.vm.memory_mib == 64 * 1024
    assert a1.vm.gpu_pci_addresses == ("0000:41:00.0", "0000:41:00.1")
    assert a1.gpu_name == "NVIDIA GeForce RTX 4090"  # from the gpucon metadata
    assert a1.gpu_uuid == a1.vm.gpu_uuid == "GPU-4090a1aa-0000-0000-0000-000000000001"
    assert a1.vm.mps is not None
    assert a1.vm.mps.daemon_running is True
    assert a1.vm.mps.thread_pct_by_server == (("triton-a", 60.0), ("triton-b", 40.0))

    a2 = slots["vm:vm-a-2"]
    assert a2.vm is not None
    assert a2.gpu_name == "rtx4090-b"  # from the user alias
    assert a2.vm.vcpus == 8  # current, not the maximum of 12
    assert a2.vm.memory_mib == 32768
    assert a2.vm.mps is None  # n/a: nothing in libvirt can say

    b1 = slots["vm:vm-b-1"]
    assert b1.vm is not None
    assert b1.vm.state == "shut off"
    assert b1.vm.gpu_pci_addresses == ("0000:61:00.0",)
    assert b1.gpu_name is None  # only the address is known

    c1 = slots["vm:vm-c-1"]
    assert c1.vm is not None
    assert c1.vm.gpu_pci_addresses == ()  # a USB hostdev is no GPU


def test_round_trips_stay_constant_and_xml_is_fetched_only_when_needed() -> None:
    counting: list[CountingConnection] = []

    def connect(uri: str) -> CountingConnection:
        counting.append(CountingConnection(libvirt.open(uri)))
        return counting[-1]

    source = LibvirtSource(URI, connect=connect)
    first = source.read()
    conn = counting[0]
    assert first.health is Health.OK
    assert conn.calls == {"getHostname": 1, "getAllDomainStats": 1, "XMLDesc": 4}
    assert first.round_trips == 1 + 1 + 1 + 4  # connect, hostname, stats, one XML per domain
    assert all(s.host == conn.conn.getHostname() for s in first.slots)

    for _ in range(3):
        steady = source.read()
        assert steady.round_trips == 1
    assert conn.calls == {"getHostname": 1, "getAllDomainStats": 4, "XMLDesc": 4}

    conn.conn.lookupByName("vm-b-1").create()  # a new domain id: its definition is re-read
    started = source.read()
    assert conn.calls["XMLDesc"] == 5
    assert started.round_trips == 2
    assert {s.id: s.vm.state for s in started.slots if s.vm}["vm:vm-b-1"] == "running"
    source.close()


def test_definitions_older_than_refresh_are_rechecked_one_per_tick() -> None:
    counting: list[CountingConnection] = []
    now = [1000.0]

    def connect(uri: str) -> CountingConnection:
        counting.append(CountingConnection(libvirt.open(uri)))
        return counting[-1]

    source = LibvirtSource(
        URI, host="kvm-a", xml_refresh_s=60.0, connect=connect, clock=lambda: now[0]
    )
    source.read()
    now[0] += 61.0
    assert source.read().round_trips == 2  # stats + one re-checked definition
    assert source.read().round_trips == 2  # the next oldest one
    assert counting[0].calls["XMLDesc"] == 6
    source.close()


def test_new_and_removed_domains_follow_the_host() -> None:
    opened: list[Any] = []
    source = LibvirtSource(URI, host="kvm-a", connect=_writable(opened))
    source.read()
    conn = opened[0]
    conn.lookupByName("vm-c-1").destroy()
    conn.lookupByName("vm-c-1").undefine()
    xml = (
        "<domain type='test'><name>vm-d-1</name><memory unit='GiB'>4</memory><vcpu>1</vcpu>"
        "<os><type>hvm</type></os><devices><hostdev mode='subsystem' type='pci'><source>"
        "<address domain='0x0000' bus='0x81' slot='0x00' function='0x0'/></source>"
        "</hostdev></devices></domain>"
    )
    conn.defineXML(xml)
    reading = source.read()
    source.close()
    slots = {s.id: s for s in reading.slots}
    assert "vm:vm-c-1" not in slots
    d1 = slots["vm:vm-d-1"]
    assert d1.vm is not None
    assert d1.vm.state == "shut off"
    assert d1.vm.gpu_pci_addresses == ("0000:81:00.0",)


def test_malformed_domain_xml_degrades_only_that_domain() -> None:
    def connect(uri: str) -> CountingConnection:
        return CountingConnection(libvirt.open(uri), corrupt_xml_of="vm-a-2")

    source = LibvirtSource(URI, host="kvm-a", connect=connect)
    reading = source.read()
    source.close()
    assert reading.health is Health.DEGRADED
    assert reading.error is not None
    assert "vm-a-2" in reading.error and "malformed domain XML" in reading.error
    slots = {s.id: s for s in reading.slots}
    assert slots["vm:vm-a-2"].vm is not None
    assert slots["vm:vm-a-2"].vm.state == "running"  # the bulk stats still tell its state
    assert slots["vm:vm-a-2"].vm.gpu_pci_addresses == ()
    assert slots["vm:vm-a-1"].gpu_name == "NVIDIA GeForce RTX 4090"


def test_parse_domain_xml_refuses_garbage_with_a_clear_error() -> None:
    with pytest.raises(ValueError, match="malformed domain XML"):
        parse_domain_xml("<domain><name>x</name>")
    with pytest.raises(ValueError, match="no <domain><name>"):
        parse_domain_xml("<network><name>x</name></network>")
    bare = parse_domain_xml("<domain><name>bare</name><devices/></domain>")
    assert bare.gpus == () and bare.vcpus is None and bare.memory_mib is None


def test_dead_connection_reads_down_then_reconnects() -> None:
    opened: list[Any] = []
    source = LibvirtSource(URI, host="kvm-a", connect=_writable(opened))
    assert source.read().health is Health.OK
    opened[0].close()  # the connection dies under the source
    down = source.read()
    assert down.health is Health.DOWN
    assert down.error is not None and URI in down.error and "libvirtError" in down.error
    again = source.read()
    assert again.health is Health.OK
    assert len(opened) == 2  # it reconnected
    source.close()


def test_unreachable_uri_is_a_down_reading_not_an_exception(tmp_path: Path) -> None:
    uri = f"test://{tmp_path}/missing.xml"
    reading = LibvirtSource(uri).read()
    assert reading.health is Health.DOWN
    assert reading.slots == ()
    assert reading.error is not None and uri in reading.error


def host_xml(domains: int) -> str:
    """A test-driver host with ``domains`` guests, each passing one RTX 4090 through."""
    parts = []
    for i in range(domains):
        bus = f"{(i % 250) + 1:02x}"
        parts.append(
            f"<domain type='test'><name>vm-{i}</name>"
            f"<uuid>6f3e0a52-1c1d-4b8e-9a41-{i:012x}</uuid>"
            "<memory unit='GiB'>32</memory><vcpu>8</vcpu><os><type>hvm</type></os><devices>"
            "<hostdev mode='subsystem' type='pci' managed='yes'><source>"
            f"<address domain='0x{i // 250:04x}' bus='0x{bus}' slot='0x00' function='0x0'/>"
            "</source></hostdev></devices></domain>"
        )
    return "<node>" + "".join(parts) + "</node>"


@pytest.mark.parametrize("domains", [8, 512])
def test_round_trips_per_tick_do_not_grow_with_the_fleet(tmp_path: Path, domains: int) -> None:
    path = tmp_path / f"host-{domains}.xml"
    path.write_text(host_xml(domains))
    source = LibvirtSource(f"test://{path}", host="kvm-a")
    first = source.read()
    steady = [source.read() for _ in range(3)]
    source.close()
    assert len(first.slots) == domains
    assert first.round_trips == 1 + 1 + domains  # connect, stats, each definition once
    assert [r.round_trips for r in steady] == [1, 1, 1]  # one bulk stats call per tick
    assert all(len(s.vm.gpu_pci_addresses) == 1 for s in steady[-1].slots if s.vm)


def test_close_never_waits_on_a_hung_read() -> None:
    release = threading.Event()
    conns: list[CountingConnection] = []

    class HangingConnection(CountingConnection):
        closed = False

        def getAllDomainStats(self, flags: int = 0) -> list[tuple[Any, dict[str, Any]]]:
            release.wait(5.0)  # a remote host that stopped answering
            return super().getAllDomainStats(flags)

        def close(self) -> int:
            self.closed = True
            return super().close()

    def connect(uri: str) -> CountingConnection:
        conns.append(HangingConnection(libvirt.open(uri)))
        return conns[-1]

    source = LibvirtSource(URI, host="kvm-a", connect=connect)
    reader = threading.Thread(target=source.read)
    reader.start()
    wait_until(lambda: bool(conns), what="the read to connect")
    started = time.monotonic()
    source.close()
    assert time.monotonic() - started < 1.0
    release.set()
    reader.join(5.0)
    assert isinstance(conns[0], HangingConnection) and conns[0].closed
