"""The fleet's parts as frozen records (msgspec Structs): GPUs, slots, VMs, backends, queues,
latency.

A field that a source cannot read is ``None`` and is shown as "n/a" — never as 0.
Sizes are MiB, times are seconds unless the name says ``_ms``, shares are percent (0–100).
"""

from __future__ import annotations

from enum import StrEnum

import msgspec

from gpucon.model.mig_profiles import ProfileTable
from gpucon.redact import redact


class Health(StrEnum):
    OK = "ok"
    DEGRADED = "degraded"
    DOWN = "down"


class SlotKind(StrEnum):
    MIG = "mig"
    GPU = "gpu"
    VM = "vm"


class BackendState(StrEnum):
    ACTIVE = "active"
    DRAINING = "draining"
    DRAINED = "drained"
    DOWN = "down"


class ComputeProcess(msgspec.Struct, frozen=True, gc=False):
    """A process using a GPU or slot, as NVML lists it."""

    pid: int
    name: str | None = None
    used_memory_mib: float | None = None


class Gpu(msgspec.Struct, frozen=True, gc=False):
    """One physical GPU."""

    uuid: str
    host: str
    index: int
    name: str | None = None
    util_pct: float | None = None
    mem_used_mib: float | None = None
    mem_total_mib: float | None = None
    temperature_c: float | None = None
    power_w: float | None = None
    power_limit_w: float | None = None
    sm_clock_mhz: float | None = None
    mem_clock_mhz: float | None = None
    mig_enabled: bool | None = None
    sm_count: int | None = None
    processes: tuple[ComputeProcess, ...] = ()
    # the GPU-instance profiles NVML offers for this GPU (None: no MIG, or not read)
    mig_profiles: ProfileTable | None = None
    # the last XID error seen (NVML events, or DCGM_FI_DEV_XID_ERRORS) and when it was seen;
    # None (or DCGM's 0): none known. ``xid_watched`` True: XIDs are watched, so no XID
    # means "none since watching"; None/False: nobody watches, the XID is "n/a"
    xid_last: int | None = None
    xid_at: float | None = None
    xid_watched: bool | None = None
    # clock event reasons: clocks held down by temperature / by the power cap (or brake)
    thermal_slowdown: bool | None = None
    power_capped: bool | None = None

    @property
    def power_pct(self) -> float | None:
        """Power drawn as a percent of the enforced limit (None when either is unknown)."""
        if self.power_w is None or not self.power_limit_w:
            return None
        return 100.0 * self.power_w / self.power_limit_w


class MpsState(msgspec.Struct, frozen=True, gc=False):
    """CUDA MPS inside a VM or on a host: is the control daemon up, and how is the GPU split."""

    daemon_running: bool | None = None
    default_thread_pct: float | None = None
    # server name -> CUDA_MPS_ACTIVE_THREAD_PERCENTAGE it runs with
    thread_pct_by_server: tuple[tuple[str, float], ...] = ()
    pinned_mem_limit: str | None = None
    # server -> the PIDs of its clients (``get_device_client_list``), where the daemon is read
    clients_by_server: tuple[tuple[str, tuple[int, ...]], ...] = ()


class VmInfo(msgspec.Struct, frozen=True, gc=False):
    """A KVM guest that a GPU is passed through to."""

    name: str
    state: str | None = None
    vcpus: int | None = None
    memory_mib: float | None = None
    host: str | None = None
    # PCI addresses (``0000:41:00.0``) of the hostdevs passed through
    gpu_pci_addresses: tuple[str, ...] = ()
    gpu_uuid: str | None = None
    mps: MpsState | None = None


class Slot(msgspec.Struct, frozen=True, gc=False):
    """The unit of compute one or more backends run on: a MIG instance, a whole GPU or a VM."""

    id: str
    kind: SlotKind
    host: str | None = None
    gpu_uuid: str | None = None
    gpu_index: int | None = None
    gpu_name: str | None = None
    # MIG: "3g.40gb"; whole GPU: the GPU's name; VM: the passed-through GPU's name
    profile: str | None = None
    gi_id: int | None = None
    ci_id: int | None = None
    sm_count: int | None = None
    mem_used_mib: float | None = None
    mem_total_mib: float | None = None
    # how busy the slot is, and the metric that says so (shown in the UI)
    activity_pct: float | None = None
    activity_metric: str | None = None
    # DCGM's SM and DRAM activity (percent), where Prometheus has them
    sm_active_pct: float | None = None
    dram_active_pct: float | None = None
    vm: VmInfo | None = None
    pod: str | None = None
    node: str | None = None
    processes: tuple[ComputeProcess, ...] = ()

    @property
    def mem_free_mib(self) -> float | None:
        if self.mem_used_mib is None or self.mem_total_mib is None:
            return None
        return self.mem_total_mib - self.mem_used_mib


class Backend(msgspec.Struct, frozen=True, gc=False):
    """One inference server registered with the scheduler (the Redis registry contract)."""

    name: str
    slot_id: str | None = None
    url: str | None = None
    model: str | None = None
    weight: float | None = None
    state: BackendState = BackendState.ACTIVE
    inflight: int | None = None
    ready: bool | None = None
    # when the scheduler last checked ``ready`` (epoch seconds, the scheduler's clock)
    ready_at: float | None = None
    owner: str | None = None
    reason: str | None = None
    pod: str | None = None
    node: str | None = None
    # when its registry state last changed (the hash's ``changed_at``, the writer's clock):
    # how long a backend has been down or drained, whenever this console started
    changed_at: float | None = None
    # when the scheduler saw ``ready`` last change (epoch seconds, the scheduler's clock; None
    # from a scheduler that does not say, or has seen only this value)
    ready_since: float | None = None


class QueueStats(msgspec.Struct, frozen=True, gc=False):
    """A Redis Stream request queue and its consumer group."""

    stream: str
    length: int | None = None
    group: str | None = None
    pending: int | None = None
    lag: int | None = None
    oldest_age_s: float | None = None
    last_delivered_id: str | None = None
    consumers: int | None = None
    # seconds since the group's most recently active consumer last read (XINFO CONSUMERS
    # ``idle``, the smallest); None when not read. A consumer that died stops resetting it.
    consumer_idle_s: float | None = None
    # how many entries the group has read in its life (XINFO GROUPS ``entries-read``, Redis 7
    # and later; None before, or with no group): it only grows while the group lives, so a
    # count that goes back says the stream or its group was made anew (``model/queue_loss``)
    entries_read: int | None = None

    @property
    def waiting(self) -> int | None:
        """Requests not yet answered: never delivered (lag) plus delivered, not acked (pending).

        XLEN is not the queue's depth: a stream keeps acked entries until it is trimmed (a
        capped stream sits at its MAXLEN forever). Without a consumer group, XLEN is all there is.
        """
        if self.lag is None and self.pending is None:
            return self.length
        return (self.lag or 0) + (self.pending or 0)


class LatencyStats(msgspec.Struct, frozen=True, gc=False):
    """What users see of one backend: rate, quantiles, errors, queue vs compute time.

    ``key`` is the backend's name, or the ``host:port`` its metrics were scraped from; the
    merge resolves the latter to a backend by its url's ``host:port`` and ``model`` (one
    inference server may serve several models, each registered as its own backend).
    """

    key: str
    req_per_s: float | None = None
    p50_ms: float | None = None
    p95_ms: float | None = None
    p99_ms: float | None = None
    error_rate: float | None = None
    errors_by_reason: tuple[tuple[str, float], ...] = ()
    queue_ms: float | None = None
    compute_ms: float | None = None
    pending: float | None = None
    # mean request latency from Triton's counters (when no quantiles are exported)
    avg_ms: float | None = None
    # the scrape address (host:port) and Triton's model/version labels, where the series had them
    address: str | None = None
    model: str | None = None
    versions: tuple[str, ...] = ()
    # the window the rates (req/s, errors) and histogram quantiles are computed over, seconds
    rate_window_s: float | None = None


class SourceStatus(msgspec.Struct, frozen=True, gc=False):
    """One source's health as the hub last saw it."""

    name: str
    health: Health
    error: str | None = None
    last_ok_at: float | None = None
    last_read_s: float | None = None
    # when the hub first asked this source (a source not read yet is not stale before its time)
    started_at: float | None = None
    # its values are stale once its last good reading is older than this (two cadences)
    stale_after_s: float | None = None

    def __post_init__(self) -> None:
        if self.error:  # shown in the status bar and snapshots: credentials masked
            msgspec.structs.force_setattr(self, "error", redact(self.error))

    def age_s(self, now: float) -> float | None:
        return None if self.last_ok_at is None else max(0.0, now - self.last_ok_at)


class NodeInfo(msgspec.Struct, frozen=True, gc=False):
    """A Kubernetes node carrying GPUs."""

    name: str
    mig_config: str | None = None
    mig_config_state: str | None = None
    unschedulable: bool = False
    allocatable: tuple[tuple[str, str], ...] = ()
    # "namespace/name" of the pods on this node that request GPU or MIG resources
    gpu_pods: tuple[str, ...] = ()
    # (pod IP, "namespace/name") of those pods: backends whose url host is the IP get the pod
    gpu_pod_ips: tuple[tuple[str, str], ...] = ()
