"""A source's first read made in a forked child process, beside the console's own start-up.

A live console sends its first reads before it imports its UI (``Hub.start_reading``), so
that they run while Textual loads, and its first frame shows data. In a worker thread that
overlap is only partial for NVML: importing ``pynvml`` (a 380 kB module, 6-14 ms) and the
Python between the driver's calls hold the interpreter lock that the UI thread's imports
need, so the first frame waited for them. ``ForkedFirstRead`` forks before any thread starts:
the child builds the real source, reads once, sends the Reading back down a pipe (pickled,
length first) and exits; the parent's worker waits on the pipe with the lock released, and
this process imports nothing of the source before its first frame. The real source (and its
client library) is built here on the second read, after the first frame. If the child
fails, takes longer than the source's timeout, or cannot be forked (no ``fork``, or threads
already running), the first read is made here, as it would have been without it.
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
from collections.abc import Callable

from gpucon.model.reading import Reading
from gpucon.sources.base import Source

_LENGTH_BYTES = 8


class _Child:
    """A forked child making the first read: its pid and the read end of its pipe."""

    __slots__ = ("fd", "pid")

    def __init__(self, pid: int, fd: int) -> None:
        self.pid = pid
        self.fd = fd

    def reading(self, timeout_s: float) -> Reading | None:
        """The child's Reading, or None if it sent none within ``timeout_s`` (it is killed)."""
        import pickle
        import select

        data = bytearray()
        wanted: int | None = None
        deadline = time.monotonic() + timeout_s
        try:
            while wanted is None or len(data) < _LENGTH_BYTES + wanted:
                left = deadline - time.monotonic()
                if left <= 0 or not select.select([self.fd], [], [], left)[0]:
                    self.stop()
                    return None
                chunk = os.read(self.fd, 1 << 16)
                if not chunk:  # the child ended without sending all of it
                    return None
                data += chunk
                if wanted is None and len(data) >= _LENGTH_BYTES:
                    wanted = int.from_bytes(data[:_LENGTH_BYTES], "big")
        finally:
            os.close(self.fd)
            self.reap()
        try:
            reading = pickle.loads(data[_LENGTH_BYTES:])
        except Exception:
            return None
        return reading if isinstance(reading, Reading) else None

    def stop(self) -> None:
        """Kill the child (a read hung in the driver)."""
        with contextlib.suppress(OSError):  # gone already
            os.kill(self.pid, 9)

    def reap(self) -> bool:
        """Collect the child's exit without waiting for it; True once it is collected."""
        try:
            pid, _status = os.waitpid(self.pid, os.WNOHANG)
        except ChildProcessError:  # collected already (or by someone else)
            return True
        return pid != 0


def _fork_first_read(make: Callable[[], Source]) -> _Child | None:
    """Fork a child that builds the source, reads it once and sends the Reading back; None
    where that cannot be done safely here."""
    # a child forked while other threads run can inherit a lock one of them held, forever
    if not hasattr(os, "fork") or threading.active_count() > 1:
        return None
    read_fd, write_fd = os.pipe()
    try:
        pid = os.fork()
    except OSError:
        os.close(read_fd)
        os.close(write_fd)
        return None
    if pid == 0:
        _child_main(make, read_fd, write_fd)
    os.close(write_fd)
    return _Child(pid, read_fd)


def _child_main(make: Callable[[], Source], read_fd: int, write_fd: int) -> None:
    """In the child: read once, send it, and leave at once (``os._exit``: no atexit handler,
    no flushing of buffers the parent owns, whatever happens, Ctrl-C included)."""
    code = 1
    try:
        import pickle

        os.close(read_fd)
        data = pickle.dumps(make().read(), protocol=pickle.HIGHEST_PROTOCOL)
        view = memoryview(len(data).to_bytes(_LENGTH_BYTES, "big") + data)
        while view:
            view = view[os.write(write_fd, view) :]
        code = 0
    finally:
        os._exit(code)


class ForkedFirstRead:
    """A source (implements ``gpucon.sources.base.Source``) whose first read is made in a
    child process forked when it is built; from the second read on, the real source, built
    here by ``make`` (which must not raise: ``session.sources`` passes one that turns a
    failure into an ``UnavailableSource``)."""

    def __init__(self, name: str, make: Callable[[], Source], cadence_s: float, timeout_s: float):
        self.name = name
        # the configured ones until the real source is built, then the real source's (an
        # UnavailableSource's are longer)
        self.cadence_s = cadence_s
        self.timeout_s = timeout_s
        self._make = make
        self._source: Source | None = None
        self._child = _fork_first_read(make)
        self._reapable: _Child | None = None

    @property
    def forked(self) -> bool:
        """Whether the first read went (or goes) to a child process."""
        return self._child is not None or self._reapable is not None

    def read(self) -> Reading:
        child, self._child = self._child, None
        if child is not None:
            reading = child.reading(self.timeout_s)
            self._reapable = child
            if reading is not None:
                return reading
        if self._reapable is not None and self._reapable.reap():
            self._reapable = None
        if self._source is None:
            self._source = self._make()
            self.cadence_s = self._source.cadence_s
            self.timeout_s = self._source.timeout_s
        return self._source.read()

    def close(self) -> None:
        child, self._child = self._child, None
        if child is not None:  # never read: the console closed before its first read
            child.stop()
            os.close(child.fd)
            child.reap()
        if self._reapable is not None:
            self._reapable.reap()
        if self._source is not None:
            self._source.close()
