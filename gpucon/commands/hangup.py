"""Noticing that the console's terminal went away, so a dropped SSH session never leaves a
console behind (an orphan redrawing for nobody, or holding an action's locks).

Two signs, either enough: SIGHUP (the session ended), or the terminal answering EIO (a pty
closed under a process that ignores SIGHUP: ``nohup``, some multiplexers). A console served to
a browser (``gpucon serve``) has no terminal: its sign is its server going away (its parent
process changes). Textual notices
neither: its input thread reads EOF and waits. ``TerminalWatch`` polls the terminal four
times a second from a daemon thread (``tcgetattr`` asks the tty driver; it never reads
input) and then calls ``on_gone(why)`` once. The console stops running actions at their next
step boundary and exits; if it has not exited ``EXIT_DEADLINE_S`` later, the watch ends the
process itself, once the actions have released their locks (or could not in time).
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
import time
from collections.abc import Callable
from types import FrameType

POLL_S = 0.25
EXIT_DEADLINE_S = 4.0  # from noticing to exiting: the process is gone within 5 s
HANGUP_EXIT = 128 + signal.SIGHUP


def terminal_fd() -> int | None:
    """The file descriptor of the terminal the console draws on (stdin, else stdout or
    stderr), or None when none is a terminal (a test, a pipe)."""
    for stream in (sys.__stdin__, sys.__stdout__, sys.__stderr__):
        with contextlib.suppress(AttributeError, ValueError, OSError):
            if stream is not None and os.isatty(stream.fileno()):
                return stream.fileno()
    return None


def terminal_gone(fd: int) -> bool:
    """Whether the terminal behind ``fd`` hung up (its driver answers EIO or EBADF)."""
    import termios

    try:
        termios.tcgetattr(fd)
    except (termios.error, OSError):
        return True
    return False


class TerminalWatch:
    """Once SIGHUP arrives or the terminal hangs up: ``stop_actions(why)`` (it returns when
    the running actions have stopped at a step boundary and released their locks, or could
    not in time); then, if the terminal still answers (a SIGHUP sent by hand), ``quit()`` so
    that the console restores it; else, or if the console has not exited by the deadline,
    ``os._exit``. Textual cannot shut down on a dead terminal: its writer thread dies on EIO
    and the shutdown blocks on its queue."""

    def __init__(
        self,
        stop_actions: Callable[[str], object],
        quit: Callable[[], object],
        *,
        fd: int | None = None,
        poll_s: float = POLL_S,
        parent_pid: int | None = None,
    ) -> None:
        self.stop_actions = stop_actions
        self.parent_pid = parent_pid
        self.quit = quit
        self.fd = terminal_fd() if fd is None else fd
        self.poll_s = poll_s
        self.finished = threading.Event()  # the console exited on its own
        self._hup = False  # set by the signal handler: a plain flag is signal-safe
        self._stop = threading.Event()
        self._previous: object = None
        self._thread = threading.Thread(target=self._watch, name="gpucon-hangup", daemon=True)

    def _on_sighup(self, signum: int, frame: FrameType | None) -> None:
        self._hup = True

    def start(self) -> TerminalWatch:
        if threading.current_thread() is threading.main_thread():
            self._previous = signal.signal(signal.SIGHUP, self._on_sighup)
        self._thread.start()
        return self

    def close(self) -> None:
        """The console exited: stop watching, restore the SIGHUP handler."""
        self.finished.set()
        self._stop.set()
        if self._previous is not None and threading.current_thread() is threading.main_thread():
            with contextlib.suppress(ValueError, TypeError):
                signal.signal(signal.SIGHUP, self._previous)  # type: ignore[arg-type]

    def _why(self) -> str | None:
        if self._hup:
            return "the terminal hung up (SIGHUP)"
        if self.fd is not None and terminal_gone(self.fd):
            return "the terminal went away"
        if self.parent_pid is not None and os.getppid() != self.parent_pid:
            return "the server that served this console went away"
        return None

    def _watch(self) -> None:
        while not self._stop.wait(self.poll_s):
            why = self._why()
            if why is not None:
                self._end(why)
                return

    def _end(self, why: str) -> None:
        noticed = time.monotonic()
        alive = self.fd is not None and not terminal_gone(self.fd)
        with contextlib.suppress(Exception):  # the exit below must happen regardless
            self.stop_actions(why)
        if alive:
            # a thread of its own: quitting waits on the console's loop, which may be stuck
            threading.Thread(target=self.quit, name="gpucon-hangup-quit", daemon=True).start()
            if self.finished.wait(max(EXIT_DEADLINE_S - (time.monotonic() - noticed), 0.0)):
                return
        if not self.finished.is_set():
            os._exit(HANGUP_EXIT)
