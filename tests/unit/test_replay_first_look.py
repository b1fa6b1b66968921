"""A replay keeps the live console's first-look marks: a node pending already at the console's
first look reads ``pending ≥5m`` (a lower bound), in the node's state and in the mig_config
alert, in the replay as live; ``--alerts-only`` re-runs the rule with the same mark (it used to
write ``pending for 5m``, and call the recorded alert's text other than its own); an alert the
console had from its first look keeps its ``≥`` age; a node seen to become pending stays exact.

The recording is written by the real recorder from a hub's snapshots and read back as replay
reads it (``ReplayCursor``)."""

from __future__ import annotations

from pathlib import Path

from gpucon.hub import Hub
from gpucon.model.alerts import AlertThresholds
from gpucon.model.fleet import NodeInfo
from gpucon.recording.cursor import ReplayCursor
from gpucon.recording.recorder import Recorder, wait_written
from gpucon.recording.rerun import rerun_alerts
from gpucon.recording.store import RecordingStore
from gpucon.widgets.alert_lines import age_text, watched_from
from gpucon.widgets.health_text import node_state
from tests.ui.fleet_fixture import FrozenClock, HandSource

T0 = 1_790_000_000.0
SECONDS = 320  # past mig_pending_for_s (300)


def test_replay_and_rerun_keep_the_first_look_marks(tmp_path: Path) -> None:
    path = tmp_path / "pending.sqlite"
    clock = FrozenClock(T0)
    pending = NodeInfo("node-a", mig_config="all-1g.10gb", mig_config_state="pending")
    settled = NodeInfo("node-b", mig_config="all-balanced", mig_config_state="success")
    source = HandSource(nodes=(pending, settled))
    hub = Hub([source], clock=clock)
    recorder = Recorder(path, fleet="hand", refresh_s=1.0, block=True, keyframe_s=60.0)
    hub.subscribe(recorder)
    live = []
    for n in range(SECONDS):
        if n == 10:  # node-b becomes pending while the console watches: exact
            later = NodeInfo("node-b", mig_config="all-1g.10gb", mig_config_state="pending")
            source.nodes = (pending, later)
        hub.poll_once()
        live.append(hub.tick())
        clock.now += 1.0
    assert wait_written(recorder, SECONDS)
    recorder.close()
    last = live[-1]
    assert last.mig_pending_unseen == frozenset({"node-a"})
    live_alerts = {a.key: a for a in last.alerts if a.rule == "mig_config"}
    assert "pending for ≥5m" in live_alerts["mig_config:node-a"].message

    store = RecordingStore(path, readonly=True)
    try:
        cursor = ReplayCursor(store)
        replayed = cursor.seek(last.taken_at)
        assert replayed is not None and replayed.taken_at == last.taken_at
        assert replayed.mig_pending_unseen == last.mig_pending_unseen
        for name in ("node-a", "node-b"):
            node = replayed.nodes[name]
            assert node_state(
                node,
                replayed.mig_pending_since.get(name),
                replayed.taken_at,
                name in replayed.mig_pending_unseen,
            ) == node_state(
                last.nodes[name],
                last.mig_pending_since.get(name),
                last.taken_at,
                name in last.mig_pending_unseen,
            )
        assert "≥" in node_state(
            replayed.nodes["node-a"],
            replayed.mig_pending_since["node-a"],
            replayed.taken_at,
            "node-a" in replayed.mig_pending_unseen,
        )
        # the alerts' ages as the panel writes them: the same marks as live
        watched = watched_from(replayed)
        assert watched == watched_from(last)
        replay_ages = {a.key: age_text(a, replayed.taken_at, watched) for a in replayed.alerts}
        live_ages = {a.key: age_text(a, last.taken_at, watched_from(last)) for a in last.alerts}
        assert replay_ages == live_ages

        # --alerts-only: the rule run again writes the mark the live console wrote
        result = rerun_alerts(store, AlertThresholds())
        fired = {s.key: s.message for s in result.fired if s.rule == "mig_config"}
        recorded = {s.key: s.message for s in result.recorded if s.rule == "mig_config"}
        assert set(fired) == {"mig_config:node-a", "mig_config:node-b"}
        assert "≥" in fired["mig_config:node-a"] and "≥" in recorded["mig_config:node-a"]
        assert "≥" not in fired["mig_config:node-b"] and "≥" not in recorded["mig_config:node-b"]
    finally:
        store.close()


def test_the_consoles_memory_of_the_registry_and_clocks_is_recorded() -> None:
    """What the live console remembered (the registry's last listing, the backends that left
    it while not serving, the scheduler's clock skew, the backends seen scraped) is in each
    frame, so a replay and ``--alerts-only`` say what the live console said."""
    import msgspec

    from gpucon.model.registry_memory import Departed, RegistryListed
    from gpucon.recording.blobs import BlobReader, BlobWriter
    from gpucon.recording.frames import DELTA, KEYFRAME, FrameState
    from gpucon.recording.writer import FrameWriter
    from tests.unit.test_recording_frames import _live

    memory = {
        "registry_listed": RegistryListed(3, T0 - 14),
        "registry_departed": (Departed("lab-b1", T0 - 9, "http refused"),),
        "scheduler_behind_s": 29.4,
        "scraped": frozenset({"lab-b0", "lab-b1"}),
    }
    live = [
        msgspec.structs.replace(s, **(memory if n >= 2 else {}))
        for n, s in enumerate(_live(None, 4))
    ]
    writer, blobs, reader, state = FrameWriter(), BlobWriter(), BlobReader(), FrameState()
    for n, snap in enumerate(live):
        if n == 0:
            state.apply(
                snap.taken_at, KEYFRAME, reader.keyframe(n, blobs.keyframe(writer.keyframe(snap)))
            )
        else:
            state.apply(snap.taken_at, DELTA, reader.delta(blobs.delta(writer.delta(snap))))
        back = state.snapshot()
        assert {k: getattr(back, k) for k in memory} == {k: getattr(snap, k) for k in memory}
