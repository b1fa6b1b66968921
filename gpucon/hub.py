"""The hub: runs sources on their cadences off the UI thread and merges readings into Snapshots.

Each source is read in a worker thread; the next read is scheduled only when the last one has
finished, so slow sources never pile up. A read that outlasts the source's timeout marks the
source degraded ("read timed out") while its last good data stays on screen, marked stale.
Every ``refresh_s`` the hub merges the newest readings into one immutable Snapshot, works out
which values are stale (model.staleness: older than two of their source's cadences, or from a
source whose newest read failed), appends the history rings (a stale value is a gap), derives
alerts, and hands the Snapshot to ``on_snapshot`` (from the hub's thread: the UI posts it to
itself as a replaceable message). A failed source is retried once per cadence (``backoff_s``).

A source whose read is long Python work (the simulator) may have a ``give_way`` attribute: the
hub sets it, before each read, to a callable the read calls between its steps, which waits
while the UI answers a key (``Hub.ui_idle``, at most ``UI_WAIT_S`` a read).

A source that checks backends itself (``observe_backends``: the readiness source) is told,
before each read, the backends and urls the other sources' latest readings name; its first
read waits for the first of those readings (at most ``FIRST_SNAPSHOT_WAIT_S``).
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import Future
from typing import TYPE_CHECKING

from msgspec.structs import replace

from gpucon.model import columns
from gpucon.model.alerts import (
    AlertInputs,
    AlertThresholds,
    derive_alerts,
    track_mig_pending,
    track_mig_unseen,
)
from gpucon.model.fleet import Backend, Health, SourceStatus
from gpucon.model.growth_runs import GrowthRuns
from gpucon.model.history import DEFAULT_CAPACITY, History, Sample
from gpucon.model.history_delta import HistoryBlocks
from gpucon.model.history_samples import history_samples, stale_series
from gpucon.model.liveness import (
    BackendLiveness,
    LivenessPolicy,
    dead_targets,
    withhold_dead_targets,
)
from gpucon.model.liveness_book import LivenessBook
from gpucon.model.merge import MergedFleet, merge_readings
from gpucon.model.queue_counts import QueueCount, QueueLost, track_queue_counts
from gpucon.model.queue_stall import QUEUE_SOURCE
from gpucon.model.reading import Reading
from gpucon.model.registry_memory import (
    Departed,
    RegistryListed,
    departures,
    track_departed,
    track_registry_listed,
)
from gpucon.model.scheduler_beat import BeatClock, SchedulerStaleness, silent_age
from gpucon.model.scrape_gone import track_scraped
from gpucon.model.section_moves import SectionMoves
from gpucon.model.snapshot import Snapshot
from gpucon.model.staleness import StaleFieldCache, Staleness, stale_after_s
from gpucon.sources.base import Source, guarded_read

if TYPE_CHECKING:
    from concurrent.futures import ThreadPoolExecutor

SnapshotCallback = Callable[[Snapshot], None]
__all__ = ["Hub", "backoff_s", "history_samples"]

# the longest the first snapshot waits for every source's first reading
FIRST_SNAPSHOT_WAIT_S = 2.0
# the hub's thread rests at least this many times as long as its last tick took (with the
# UI's preparation and the collector's pass before it) before the next one
REST_PER_WORK = 1.0
# the longest stop() waits for the sources to close
CLOSE_WAIT_S = 1.0
# the longest one tick (or read, or tick preparation) waits, in all, for the UI to answer keys
# (``Hub.ui_idle``)
UI_WAIT_S = 0.3


class _SourceState:
    """The hub's book-keeping for one source: its last readings and when to read it next.
    A plain class, not a dataclass: defining one costs ~0.5 ms of every console's start."""

    __slots__ = ("failures", "in_flight_since", "last", "last_good", "next_due", "source")

    def __init__(self, source: Source) -> None:
        self.source = source
        self.last_good: Reading | None = None
        self.last: Reading | None = None
        self.in_flight_since: float | None = None
        self.next_due = 0.0
        self.failures = 0


# a failed source is retried once per cadence, never more often than this
MIN_RETRY_S = 0.25


def backoff_s(cadence_s: float, failures: int) -> float:
    """Delay before the next read of a source that failed ``failures`` times in a row.

    A failed source is retried at its cadence, not on a growing backoff: one cheap attempt
    per cadence (a refused connection, or one query that times out) does not hammer a dead
    server, and a server that comes back is read within one cadence of answering again, so
    its data is fresh within two cadences of its return.
    """
    if failures <= 0:
        return cadence_s
    return max(cadence_s, MIN_RETRY_S)


def next_read_at(cadence_s: float, failures: int, started: float | None, now: float) -> float:
    """When a source whose read (started at ``started``) ended at ``now`` is read next.

    A good read's next one is due a cadence after this one *started*, so a source keeps its
    cadence however long its reads take (counted from the end, a 0.5 s readiness check whose
    read takes 30 ms would run every 0.53 s); a read that took most of its cadence still
    leaves the source a quarter cadence of rest. A failed source is retried on
    ``backoff_s`` from now.
    """
    if failures > 0 or started is None:
        return now + backoff_s(cadence_s, failures)
    return max(started + cadence_s, now + cadence_s / 4)


class UiGate:
    """Waits while the UI answers a key (``Hub.ui_idle`` cleared), at most ``budget_s`` over
    all its calls; at once when the UI is idle.

    The budget counts time spent waiting, not time since the work began: on a loaded machine
    a tick or a read takes several times its CPU in wall time, and a deadline from its start
    had passed before most keys came, so they shared the interpreter with it after all.
    """

    __slots__ = ("_idle", "_left")

    def __init__(self, idle: threading.Event, budget_s: float = UI_WAIT_S) -> None:
        self._idle = idle
        self._left = budget_s

    def __call__(self) -> None:
        if self._left <= 0.0 or self._idle.is_set():
            return
        started = time.monotonic()
        self._idle.wait(self._left)
        self._left -= time.monotonic() - started


class Hub:
    """Reads sources in worker threads and builds one Snapshot per tick."""

    def __init__(
        self,
        sources: Sequence[Source],
        *,
        refresh_s: float = 1.0,
        thresholds: AlertThresholds | None = None,
        slo_p95_ms_by_model: Mapping[str, float] | None = None,
        clock: Callable[[], float] = time.time,
        history_capacity: int = DEFAULT_CAPACITY,
        rate_window: str | None = None,
        liveness_policy: LivenessPolicy | None = None,
    ) -> None:
        self.refresh_s = refresh_s
        # the window the latency source's rates are taken over (shown with REQ/S)
        self.rate_window = rate_window
        # node name -> since when its mig.config.state has been pending (alerts need it)
        self._mig_pending_since: dict[str, float] = {}
        # of those, the nodes pending already when first seen (``track_mig_unseen``)
        self._mig_pending_unseen: frozenset[str] = frozenset()
        # the backends seen scraped by Prometheus (``model/scrape_gone.py``)
        self._scraped: frozenset[str] = frozenset()
        self._scraped_from: Mapping[str, BackendLiveness] | None = None
        # heartbeats aged on this console's clock once seen to change (``scheduler_beat``)
        self._beat_clock = BeatClock()
        # each stream's consumer-group read count, and the streams made anew lately
        # (``model/queue_counts.py``)
        self._queue_counts: Mapping[str, QueueCount] = {}
        self._queue_lost: tuple[QueueLost, ...] = ()
        # the registry's last non-empty listing (``model/registry_memory.py``)
        self._registry_listed: RegistryListed | None = None
        # backends that left the registry while not serving (``model/registry_memory.py``)
        self._departed: tuple[Departed, ...] = ()
        self.thresholds = thresholds or AlertThresholds()
        self.slo_p95_ms_by_model = dict(slo_p95_ms_by_model or {})
        self.clock = clock
        self._states = [_SourceState(s) for s in sources]
        self._lock = threading.Lock()
        self._history = History(capacity=history_capacity)
        # each slot's memory growth run, kept as the history is appended (the memory trend
        # rule reads it instead of walking every slot's history back each tick)
        self._mem_runs = GrowthRuns(history_capacity)
        # the history's blocks, read again only where entities changed; what they find is
        # noted for a subscriber (the recorder) only once one subscribes: the findings hold
        # a few ticks of old mappings (~28 MiB at 2,048 GPUs) that a console not recording
        # has no use for
        self._blocks = HistoryBlocks()
        # where those findings are noted (the recorder is handed this hub's)
        self.moves = SectionMoves()
        self._stale_fields = StaleFieldCache()
        self._scheduler_stale = SchedulerStaleness()
        self._gaps: tuple[object, list[str]] = (None, [])
        self._merged: tuple[tuple[Reading, ...], MergedFleet | None] = ((), None)
        self._slo: tuple[object, list[str], list[str | None], dict[str, float]]
        self._slo = (None, [], [], {})  # (SLOs by model, backends, their models, the SLOs)
        self._snapshot: Snapshot | None = None
        # the snapshot before the newest, let go of when the next tick begins: the UI drops
        # it when it shows the newest, and what only it held (at 512 GPUs with every value
        # changing, ~10,000 records, ~3 ms to free) is then freed on this thread, not the UI's
        self._older: Snapshot | None = None
        self._seq = 0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._pool: ThreadPoolExecutor | None = None
        self._started_at = clock()
        self._liveness = LivenessBook(liveness_policy)
        # the verdicts last read for dead scrape targets, and those targets
        self._dead: tuple[object, list[str]] = (None, [])
        # called with every snapshot tick() makes (the recorder, which frames it here while
        # its records are in this core's caches): they must not block
        self._subscribers: list[SnapshotCallback] = []
        # cleared by the UI while it answers a key (gpucon.app): the hub's thread then waits
        # between a tick's phases, at most UI_WAIT_S a tick, so that the key does not share
        # the interpreter with the tick (one lock for every Python thread)
        self.ui_idle = threading.Event()
        self.ui_idle.set()
        # run on the hub's thread just before each tick while the UI is idle (the console's
        # garbage collection, ``commands/gc_pace.py``): one snapshot is alive then
        self.between_ticks: Callable[[], object] | None = None

    @property
    def sources(self) -> tuple[Source, ...]:
        return tuple(st.source for st in self._states)

    @property
    def latest(self) -> Snapshot | None:
        return self._snapshot

    def subscribe(self, callback: SnapshotCallback) -> None:
        """Hand ``callback`` every snapshot from now on, from the thread that ticks (the hub's),
        before the UI is handed it: it must never wait on anything (the recorder builds the
        tick's delta, ~1.5 ms at 512 GPUs, and queues it for its own thread's disk write)."""
        self._blocks.note_moves_in(self.moves)
        self._subscribers.append(callback)

    def restore_history(self, ticks: Iterable[tuple[float, Mapping[str, Sample]]]) -> None:
        """Append recorded ticks (time, samples) to the history before the first live tick,
        oldest first (a console restarted on its own recording starts with its plots filled)."""
        for t, samples in ticks:
            self._history = self._history.append(t, samples)

    # -- readings ---------------------------------------------------------------------------

    def record(self, reading: Reading) -> None:
        """Take a finished reading (from a worker, or directly in tests)."""
        with self._lock:
            for st in self._states:
                if st.source.name == reading.source:
                    started, st.in_flight_since = st.in_flight_since, None
                    st.last = reading
                    if reading.health is Health.DOWN:
                        st.failures += 1
                    else:
                        st.failures = 0
                        st.last_good = reading
                    st.next_due = next_read_at(
                        st.source.cadence_s, st.failures, started, self.clock()
                    )
                    return

    def poll_once(self) -> None:
        """Read every source now, in this thread (``gpucon snapshot``, tests)."""
        for st in self._states:
            self._tell_backends(st)
            self.record(guarded_read(st.source, self.clock))

    def _backend_urls(self, asking: Source) -> dict[str, str]:
        """Backend name -> url from the other sources' last good readings (first one wins)."""
        with self._lock:
            readings = [
                st.last_good
                for st in self._states
                if st.last_good is not None and st.source is not asking
            ]
        urls: dict[str, str] = {}
        for r in readings:
            for b in r.backends:
                if b.url and b.name not in urls:
                    urls[b.name] = b.url
        return urls

    def _tell_backends(self, st: _SourceState) -> bool:
        """Hand a backend-checking source the backends to check; False while nothing has
        named any backend yet and the first snapshot may still wait for it."""
        observe = getattr(st.source, "observe_backends", None)
        if observe is None:
            return True
        urls = self._backend_urls(st.source)
        if not urls and st.last is None and self._pool is not None:
            with self._lock:
                others_waiting = any(
                    o.last is None for o in self._states if o.source is not st.source
                )
            if others_waiting and self.clock() - self._started_at < FIRST_SNAPSHOT_WAIT_S:
                return False
        observe(urls)
        return True

    def _status(self, st: _SourceState, now: float) -> SourceStatus:
        name = st.source.name
        last_ok_at = st.last_good.taken_at if st.last_good else None
        read_s = st.last.duration_s if st.last else None
        after = stale_after_s(st.source.cadence_s)
        if st.in_flight_since is not None and now - st.in_flight_since > st.source.timeout_s:
            waited = now - st.in_flight_since
            return SourceStatus(
                name,
                Health.DEGRADED,
                f"read timed out ({waited:.1f}s > {st.source.timeout_s:.1f}s)",
                last_ok_at,
                read_s,
                self._started_at,
                after,
            )
        if st.last is None:
            return SourceStatus(
                name, Health.DOWN, "not read yet", None, None, self._started_at, after
            )
        return SourceStatus(
            name, st.last.health, st.last.error, last_ok_at, read_s, self._started_at, after
        )

    @staticmethod
    def _stale_age(st: _SourceState, now: float) -> float | None:
        """The age of a source's data when it is stale (too old, or its newest read failed)."""
        good = st.last_good
        if good is None:
            return None
        age = max(0.0, now - good.taken_at)
        failed = st.last is not None and st.last is not good and st.last.health is Health.DOWN
        return age if failed or age > stale_after_s(st.source.cadence_s) else None

    # -- snapshots --------------------------------------------------------------------------

    def tick(self) -> Snapshot:
        """Merge the newest readings into a new Snapshot (also advances the history)."""
        self._older = None  # freed here if the UI has moved on to the newest (it has, a tick on)
        now = self.clock()
        give_way = self.ui_gate()  # waits while the UI answers a key, UI_WAIT_S at most
        with self._lock:
            readings = [st.last_good for st in self._states if st.last_good is not None]
            statuses = {st.source.name: self._status(st, now) for st in self._states}
            stale = {
                st.source.name: age
                for st in self._states
                if (age := self._stale_age(st, now)) is not None
            }
            # heartbeats read from a fresh Redis (a stale one's values are stale already)
            beats = [
                (
                    self._beat_clock(good.scheduler_beat, good.taken_at, st.source.cadence_s),
                    good.taken_at,
                    st.source.cadence_s,
                )
                for st in self._states
                if (good := st.last_good) is not None
                and good.scheduler_beat is not None
                and st.source.name not in stale
            ]
        fleet = self._merge(readings, give_way)
        give_way()
        liveness = self._liveness.judge_readings(fleet.backends, readings, now)
        if self._dead[0] is not liveness:  # the same verdicts (most ticks): the same dead
            self._dead = (liveness, dead_targets(liveness))
        latency = withhold_dead_targets(fleet.latency, liveness, self._dead[1])
        fleet = replace(fleet, latency=latency)
        give_way()
        staleness = self._stale_fields(readings, fleet, stale)
        # a silent scheduler: its in-flight counts are stale however fresh Redis is
        silent_s = silent_age(beats, now)
        staleness = self._scheduler_stale(staleness, fleet.backends, silent_s, fleet.latency)
        if self._gaps[0] is not staleness.fields:  # the same stale values: the same gaps
            self._gaps = (staleness.fields, stale_series(staleness))
        give_way()
        self._append_history(now, fleet, staleness, give_way)
        slo = self._slo_of(fleet.backends)
        give_way()
        previous = self._snapshot.alerts if self._snapshot else ()
        self._mig_pending_since = track_mig_pending(self._mig_pending_since, fleet.nodes, now)
        self._mig_pending_unseen = track_mig_unseen(
            self._mig_pending_unseen,
            self._snapshot.nodes if self._snapshot is not None else None,
            fleet.nodes,
        )
        if liveness is not self._scraped_from:  # the same verdicts: nobody new is scraped
            self._scraped, self._scraped_from = track_scraped(self._scraped, liveness), liveness
        registry = statuses.get(QUEUE_SOURCE)
        registry_fresh = (
            registry is not None
            and registry.health is not Health.DOWN
            and QUEUE_SOURCE not in stale
        )
        self._registry_listed = track_registry_listed(
            self._registry_listed, fleet.backends, registry_fresh, now
        )
        last = self._snapshot
        left = {} if last is None else departures(last.backends, last.liveness, fleet.backends)
        self._departed = track_departed(self._departed, left, fleet.backends, registry_fresh, now)
        self._queue_counts, self._queue_lost = track_queue_counts(
            self._queue_counts, self._queue_lost, fleet.queues, registry_fresh, now
        )
        alerts = derive_alerts(
            AlertInputs(
                now,
                fleet.slots,
                fleet.backends,
                fleet.latency,
                fleet.queues,
                statuses,
                self._history,
                slo,
                gpus=fleet.gpus,
                nodes=fleet.nodes,
                mig_pending_since=self._mig_pending_since,
                mig_pending_unseen=self._mig_pending_unseen,
                liveness=liveness,
                mem_runs=self._mem_runs,
                scheduler_silent_s=silent_s,
                registry_listed=self._registry_listed,
                scheduler_behind_s=self._beat_clock.behind_s,
                scraped=self._scraped,
                registry_departed=self._departed,
                queue_lost=self._queue_lost,
            ),
            self.thresholds,
            previous,
            between_rules=give_way,
        )
        self._seq += 1
        snapshot = Snapshot(
            taken_at=now,
            seq=self._seq,
            gpus=fleet.gpus,
            slots=fleet.slots,
            backends=fleet.backends,
            queues=fleet.queues,
            latency=fleet.latency,
            nodes=fleet.nodes,
            sources=statuses,
            alerts=alerts,
            history=self._history,
            origins=fleet.origins,
            slo_p95_ms=slo,
            rate_window=self.rate_window,
            mig_pending_since=dict(self._mig_pending_since),
            mig_pending_unseen=self._mig_pending_unseen,
            staleness=staleness,
            liveness=liveness,
            mps=fleet.mps,
            registry_listed=self._registry_listed,
            scheduler_behind_s=self._beat_clock.behind_s,
            scraped=self._scraped,
            registry_departed=self._departed,
            queue_lost=self._queue_lost,
        )
        self._older, self._snapshot = self._snapshot, snapshot
        if self._subscribers:
            give_way()  # the recorder frames the tick here: after the UI's key, if one is on
        for callback in self._subscribers:
            callback(snapshot)
        return snapshot

    def _append_history(
        self, now: float, fleet: MergedFleet, staleness: Staleness, give_way: Callable[[], None]
    ) -> None:
        """Append this tick's samples to the history rings, and the slots' memory to their
        growth runs (``give_way`` between the two halves: ~20 ms of CPU at 2,048 GPUs)."""
        blocks, single = self._blocks(fleet, staleness, self._gaps[1], give_way)
        give_way()
        self._history = self._history.append_blocks(now, blocks, single)
        for kind, series, ids, values in blocks:
            if kind == "slot" and series == "mem_used":
                self._mem_runs.update(self._history.appended - 1, now, ids, values)

    def _slo_of(self, backends: Mapping[str, Backend]) -> dict[str, float]:
        """Each backend's p95 SLO by its model; last tick's dict while the same backends
        serve the same models (one list of models compared, not a dict built)."""
        names, models = list(backends), columns.models(backends)
        by_model = self.slo_p95_ms_by_model
        memo = self._slo
        # the SLOs by model compared too (a few models): a caller may change them in place
        if memo[1] == names and memo[2] == models and memo[0] == by_model:
            return memo[3]
        pairs = zip(names, models, strict=True)
        slo = {n: by_model[m] for n, m in pairs if m is not None and m in by_model}
        self._slo = (dict(by_model), names, models, slo)
        return slo

    def ui_gate(self) -> UiGate:
        """A gate for one tick, read or tick preparation: called between its steps, it waits
        while the UI answers a key, at most ``UI_WAIT_S`` over all its calls."""
        return UiGate(self.ui_idle)

    def _merge(self, readings: list[Reading], give_way: Callable[[], object]) -> MergedFleet:
        """The merged fleet; the last one again when no source has read anything new since
        (a slow source's cadence is often several ticks)."""
        last_from, last = self._merged
        if (
            last is not None
            and len(last_from) == len(readings)
            and all(a is b for a, b in zip(last_from, readings, strict=True))
        ):
            return last
        fleet = merge_readings(readings, give_way)
        self._merged = (tuple(readings), fleet)
        return fleet

    # -- background running ----------------------------------------------------------------

    def start_reading(self) -> None:
        """Submit every source's first read now, in worker threads, and tick nothing: the
        console calls it before it imports its UI, so that the first reads (NVML's
        initialisation, a first connection) run while Textual loads. ``start`` goes on from
        there; ``tick_if_read`` makes the first snapshot if they are in by then."""
        if self._pool is not None:
            return
        from concurrent.futures import ThreadPoolExecutor  # imported when reading starts

        self._pool = ThreadPoolExecutor(
            max_workers=max(1, len(self._states)), thread_name_prefix="gpucon-source"
        )
        self._started_at = self.clock()
        self._submit_due(self._started_at)

    def tick_if_read(self, within_s: float = 0.0) -> Snapshot | None:
        """The first snapshot, made as soon as every source has answered its first read (so
        a console's first frame can show data), waiting at most until ``within_s`` after
        ``start_reading``; None if one has not answered by then (it is then ticked later)."""
        left = within_s - (self.clock() - self._started_at)
        deadline = time.monotonic() + max(0.0, left)
        while True:
            with self._lock:
                waiting = any(st.last is None for st in self._states)
            if not waiting:
                return self.tick()
            if time.monotonic() >= deadline or self._stop.wait(0.002):
                return None
            if self._thread is None and self._pool is not None:
                # a backend checker's first read goes out once a reading names the backends
                self._submit_due(self.clock())

    def start(self, on_snapshot: SnapshotCallback) -> None:
        """Start reading sources and emitting snapshots from a background thread."""
        if self._thread is not None:
            return
        self._stop.clear()
        self.start_reading()  # reads submitted earlier stay in flight: none is sent twice
        self._thread = threading.Thread(
            target=self._run, args=(on_snapshot,), name="gpucon-hub", daemon=True
        )
        self._thread.start()

    def _submit_due(self, now: float) -> None:
        assert self._pool is not None
        for st in self._states:
            with self._lock:
                if st.in_flight_since is not None or now < st.next_due:
                    continue
            if not self._tell_backends(st):
                continue
            with self._lock:
                st.in_flight_since = now
            if hasattr(st.source, "give_way"):  # one read in flight per source: its own gate
                st.source.give_way = self.ui_gate()
            future: Future[Reading] = self._pool.submit(guarded_read, st.source, self.clock)
            future.add_done_callback(self._on_done)

    def _on_done(self, future: Future[Reading]) -> None:
        if not future.cancelled() and future.exception() is None:
            self.record(future.result())

    def _first_readings_in(self) -> bool:
        """True once every source has answered, or the slowest one's timeout has passed."""
        with self._lock:
            waiting = [st for st in self._states if st.last is None]
        if not waiting:
            return True
        limit = min(FIRST_SNAPSHOT_WAIT_S, max(st.source.timeout_s for st in waiting))
        return self.clock() - self._started_at >= limit

    def _run(self, on_snapshot: SnapshotCallback) -> None:
        self._submit_due(self.clock())
        # the first snapshot waits (briefly) for the first readings, so it is not an empty one
        while not self._stop.is_set() and not self._first_readings_in():
            self._stop.wait(0.005)
            self._submit_due(self.clock())  # a backend checker waits for the backends
        # a snapshot made before start (the demo's first frame) counts as this tick's
        primed = self._snapshot
        next_tick = self.clock() if primed is None else primed.taken_at + self.refresh_s
        while not self._stop.is_set():
            self.ui_gate()()  # reads start after a key too
            self._submit_due(self.clock())
            now = self.clock()
            if now >= next_tick:
                started = time.monotonic()
                if self.between_ticks is not None and self.ui_idle.is_set():
                    with contextlib.suppress(Exception):  # never the end of the hub's thread
                        self.between_ticks()
                on_snapshot(self.tick())
                # the thread rests at least as long as the tick took: on a machine so loaded
                # that a tick outlasts the refresh, ticks come further apart instead of
                # back to back, and a key still finds the interpreter free half the time
                worked = time.monotonic() - started
                next_tick = max(now + self.refresh_s, self.clock() + worked * REST_PER_WORK)
            # wake at the next tick, or sooner to submit a read that falls due
            with self._lock:
                dues = [st.next_due for st in self._states if st.in_flight_since is None]
            wake = min([next_tick, *dues]) - self.clock()
            self._stop.wait(max(0.01, min(wake, self.refresh_s)))

    def stop(self) -> None:
        """Stop the background thread and close every source (reads in flight are abandoned)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=2.0)
            self._thread = None
        if self._pool is not None:
            self._pool.shutdown(wait=False, cancel_futures=True)
            self._pool = None
        # sources close in a helper thread: a close stuck behind a hung read (a lost GPU, a
        # dead libvirt connection) must not hang the caller, which is often the UI thread
        closer = threading.Thread(target=self._close_sources, name="gpucon-close", daemon=True)
        closer.start()
        closer.join(timeout=CLOSE_WAIT_S)

    def _close_sources(self) -> None:
        for st in self._states:
            with contextlib.suppress(Exception):  # one failing close must not stop the rest
                st.source.close()


def with_status(snapshot: Snapshot, **changes: object) -> Snapshot:
    """A copy of ``snapshot`` with fields replaced (tests and the simulator use it)."""
    return replace(snapshot, **changes)
