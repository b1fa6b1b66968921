"""History samples recorded as columns (format 3): each frame's samples are those the live
hub appended to its history that tick, read back exactly, deltas XOR'd against the frame
before, and a family whose entities changed recorded with its ids again."""

from __future__ import annotations

from array import array
from pathlib import Path

from gpucon.model.history import History, Sample
from gpucon.model.snapshot import Snapshot
from gpucon.recording.columns import ColumnReader, ColumnWriter, is_columns, parse
from gpucon.recording.cursor import ReplayCursor
from gpucon.recording.frames import FrameState, snapshot_samples
from gpucon.recording.store import FORMAT, RecordingStore
from gpucon.session import DemoOptions
from gpucon.session.record import record_simulated


def _recorded(history: History, keys: list[str]) -> dict[str, Sample]:
    return {k: v for k in keys if (v := history.last(k)) is not None}


def test_each_frame_holds_the_samples_the_hub_appended_to_its_history(tmp_path: Path) -> None:
    path = tmp_path / "r.sqlite"
    live: dict[float, dict[str, Sample]] = {}

    def keep(snapshot: Snapshot) -> None:
        # the history's newest values, as the hub stored them (single precision)
        keys = list(snapshot_samples(snapshot))
        live[snapshot.taken_at] = _recorded(snapshot.history, keys)

    record_simulated(
        path,
        seconds=40,
        demo=DemoOptions(7, "noisy-neighbour", None),
        keyframe_s=15.0,
        on_snapshot=keep,
    )
    store = RecordingStore(path, readonly=True)
    assert store.meta()["format"] == FORMAT == "gpucon-recording/6"
    state = FrameState()
    xored = 0
    for t, kind, _, samples in store.frame_parts(min(live), fleet=False):
        blob = store.db.execute("SELECT samples FROM frames WHERE t = ?", (t,)).fetchone()[0]
        assert is_columns(blob)
        xored += sum(f[5] for f in parse(blob)[0])
        assert samples is not None
        state.apply(t, kind, samples)
        got = state.samples()
        assert got == live[t], t
        assert got  # the demo's series are there
    assert xored > 0  # deltas are recorded against the frame before

    # a seek fills the plots with the same values
    cursor = ReplayCursor(store)
    t_end = max(live)
    cursor.seek(t_end)
    cursor.fill_history()
    key = next(k for k in live[t_end] if k.startswith("slot:") and k.endswith(":activity"))
    assert cursor.history.last(key) == live[t_end][key]
    times = sorted(live)
    assert cursor.history.back(key, 1) == live[times[-2]].get(key)
    store.close()


def _cols(
    ids: tuple[str, ...], values: list[float]
) -> dict[tuple[str, str], tuple[tuple[str, ...], bytes, str]]:
    return {("gpu", "temp"): (ids, array("f", values).tobytes(), "f")}


def test_ids_change_and_a_delta_with_no_base() -> None:
    writer = ColumnWriter()
    reader = ColumnReader()
    key = writer.encode(_cols(("a", "b"), [1.0, 2.0]), {"fleet:power": 3.0}, key=True)
    reader.apply(True, parse(key))
    same = writer.encode(_cols(("a", "b"), [1.0, 2.5]), {}, key=False)
    head = parse(same)[0][0]
    assert head[4] is None and head[5] == 1  # ids not repeated, XOR'd against the last
    reader.apply(False, parse(same))
    assert reader.samples() == {"gpu:a:temp": 1.0, "gpu:b:temp": 2.5}
    moved = writer.encode(_cols(("a", "c", "b"), [1.0, float("nan"), 2.5]), {}, key=False)
    assert parse(moved)[0][0][4:] == [["a", "c", "b"], 0]
    reader.apply(False, parse(moved))
    assert reader.samples() == {"gpu:a:temp": 1.0, "gpu:b:temp": 2.5}  # NaN: a gap
    blocks = reader.blocks()
    assert blocks[0][2] == ("a", "c", "b")
    # a delta whose keyframe was not read gives nothing rather than garbage
    fresh = ColumnReader()
    fresh.apply(False, parse(writer.encode(_cols(("a", "c", "b"), [1.0, 2.0, 3.0]), {}, key=False)))
    assert fresh.samples() == {}


EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "noisy-neighbour.recording.sqlite"


def test_a_format_1_file_appended_to_reads_both_parts(tmp_path: Path) -> None:
    path = tmp_path / "old.sqlite"
    path.write_bytes(EXAMPLE.read_bytes())
    live: dict[float, dict[str, Sample]] = {}

    def keep(snapshot: Snapshot) -> None:
        live[snapshot.taken_at] = _recorded(snapshot.history, list(snapshot_samples(snapshot)))

    record_simulated(
        path, seconds=20, demo=DemoOptions(7, None, None), start=1_790_000_300.0, on_snapshot=keep
    )
    store = RecordingStore(path, readonly=True)
    assert store.meta()["format"] == FORMAT
    cursor = ReplayCursor(store)
    cursor.seek(1_790_000_100.0)  # the format-1 part: samples as JSON
    cursor.fill_history()
    old_key = next(k for k in store_keys(cursor.history) if k.endswith(":activity"))
    assert cursor.history.last(old_key) is not None
    t = max(live)
    cursor.seek(t)  # the part appended: samples as columns
    cursor.fill_history()
    key = next(k for k in live[t] if k.endswith(":activity"))
    assert cursor.history.last(key) == live[t][key]
    store.close()


def store_keys(history: History) -> list[str]:
    rings = history._columns
    assert rings is not None
    return rings.keys(rings.oldest(), rings.count)
