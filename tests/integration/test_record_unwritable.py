"""A recording file that cannot be written, on real file systems: a missing directory, a
directory given as the file, a full disk (a 1 MiB tmpfs filled to the last block) and a
read-only mount. The store names the file and the OS error (not SQLite's "unable to open
database file"); ``gpucon record`` exits 1 at once saying so; ``--record`` on the console
opens a session all the same (tests/smoke/test_record_failed_tmux.py shows its screen)."""

from __future__ import annotations

import argparse
import errno
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from gpucon.commands.cli import build_parser
from gpucon.recording.recorder import Recorder
from gpucon.recording.store import RecordingStore, RecordingUnwritable

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]


def _mount_tmpfs(where: Path, *options: str) -> None:
    where.mkdir()
    found = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", ",".join(["size=1m", *options]), "tmpfs", str(where)],
        capture_output=True,
        text=True,
    )
    if found.returncode != 0:
        pytest.skip(f"a tmpfs cannot be mounted here (needs root): {found.stderr.strip()}")


def _unmount(where: Path) -> None:
    if subprocess.run(["umount", str(where)]).returncode != 0:
        subprocess.run(["umount", "--lazy", str(where)], check=True)  # a file left open
        raise AssertionError(f"{where} was still in use at the test's end")


def _fill(filler: Path) -> None:
    """Write ``filler`` until its file system has no block left."""
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT)
    try:
        while True:
            os.write(fd, b"\0" * 4096)
    except OSError as exc:
        assert exc.errno == errno.ENOSPC
    finally:
        os.close(fd)
    assert os.statvfs(filler.parent).f_bavail == 0


@pytest.fixture
def full_disk(tmp_path: Path) -> Iterator[Path]:
    """A directory on a file system with no free block."""
    where = tmp_path / "full"
    _mount_tmpfs(where)
    try:
        _fill(where / "filler")
        yield where
    finally:
        _unmount(where)


@pytest.fixture
def read_only(tmp_path: Path) -> Iterator[Path]:
    where = tmp_path / "ro"
    _mount_tmpfs(where, "ro")
    try:
        yield where
    finally:
        _unmount(where)


def _refused(path: Path) -> RecordingUnwritable:
    with pytest.raises(RecordingUnwritable) as caught:
        Recorder(path, fleet="lab", refresh_s=1.0)
    message = str(caught.value)
    assert str(path) in message
    return caught.value


def test_a_missing_directory_is_said_as_the_os_says_it(tmp_path: Path) -> None:
    path = tmp_path / "no-such-dir" / "night.sqlite"
    found = _refused(path)
    assert found.error.errno == errno.ENOENT
    assert str(found) == (
        f"cannot record to {path}: No such file or directory (ENOENT; {path.parent} does not exist)"
    )
    assert found.reason == "No such file or directory"
    assert not path.parent.exists()  # nothing made on the way


def test_a_directory_given_as_the_file_is_said_so(tmp_path: Path) -> None:
    found = _refused(tmp_path)
    assert found.error.errno == errno.EISDIR and "Is a directory" in str(found)


def test_a_full_disk_is_said_and_leaves_no_empty_file(full_disk: Path) -> None:
    path = full_disk / "night.sqlite"
    found = _refused(path)
    assert found.error.errno == errno.ENOSPC
    assert "No space left on device (ENOSPC; 0 KiB free)" in str(found)
    assert sorted(p.name for p in full_disk.iterdir()) == ["filler"]


def test_a_read_only_mount_is_said_so(read_only: Path) -> None:
    found = _refused(read_only / "night.sqlite")
    assert found.error.errno == errno.EROFS and "Read-only file system" in str(found)


def test_an_existing_recording_on_a_disk_that_filled_is_said_so(full_disk: Path) -> None:
    """The file was written before the disk filled: opening it to record more fails on the
    first write (its meta), said as a full disk, and the recording is left as it was."""
    (full_disk / "filler").unlink()
    path = full_disk / "night.sqlite"
    RecordingStore(path).close()
    size = path.stat().st_size
    _fill(full_disk / "filler")
    found = _refused(path)
    assert found.error.errno == errno.ENOSPC
    assert path.stat().st_size == size
    (full_disk / "filler").unlink()  # a reader needs room for SQLite's shared-memory index
    store = RecordingStore(path, readonly=True)
    try:
        assert store.meta()["format"]
    finally:
        store.close()


def _record(tmp_path: Path, path: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GPUCON_")}
    env.update(
        PYTHONPATH=str(ROOT),
        XDG_CONFIG_HOME=str(tmp_path / "config"),
        XDG_STATE_HOME=str(tmp_path / "state"),
    )
    started = time.monotonic()
    # no --duration: only the failure ends it (a recorder that started would run until killed)
    done = subprocess.run(
        [sys.executable, "-m", "gpucon.commands.cli", "record", str(path), "--demo"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert time.monotonic() - started < 30
    return done


def test_gpucon_record_exits_at_once_naming_the_file_and_the_error(
    tmp_path: Path, full_disk: Path
) -> None:
    missing = tmp_path / "gone" / "night.sqlite"
    done = _record(tmp_path, missing)
    assert done.returncode == 1, done.stderr
    assert done.stderr.strip() == (
        f"gpucon record: cannot record to {missing}: No such file or directory "
        f"(ENOENT; {missing.parent} does not exist)"
    )
    full = full_disk / "night.sqlite"
    done = _record(tmp_path, full)
    assert done.returncode == 1, done.stderr
    assert f"cannot record to {full}: No space left on device" in done.stderr
    assert "Ctrl-C stops" not in done.stderr  # it never said it was recording


def test_the_console_opens_without_the_recording(full_disk: Path) -> None:
    from gpucon.commands import console
    from gpucon.config import GpuconConfig
    from gpucon.session.record import NotRecording

    path = full_disk / "night.sqlite"
    argv = ["demo", "--record", str(path), "--size", "16"]
    args: argparse.Namespace = build_parser(argv).parse_args(argv)
    session, recorder = console._open(args, GpuconConfig(), 1.0)
    try:
        assert isinstance(recorder, NotRecording)
        assert session.hub.latest is not None  # the demo's first tick: the console has data
        status = recorder.status()
        assert status.state == "failed"
        assert status.badge() == "REC FAILED night.sqlite: No space left on device"
        assert recorder.error is not None and str(path) in recorder.error
    finally:
        session.close()
        if recorder is not None:
            recorder.close()
