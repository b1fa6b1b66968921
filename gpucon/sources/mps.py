"""CUDA MPS control daemons, read directly: is the daemon up, its servers, their clients, the
thread percentages and the pinned-memory limit.

Each daemon is given as an ``MpsReader``: the target the config names and a function that
sends one control command and returns its answer (``gpucon.session.sources`` builds it on the
daemon's transport: this machine or a VM over SSH). This source sends only ``get_...``
commands (anything else is refused here), reads the daemons in parallel, and bounds the whole
read by its timeout: a daemon that does not answer in time is reported, not waited for. A
daemon that is down reads ``daemon_running=False``; one that cannot be reached at all is left
out (n/a) and named in the reading's error.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor, wait

import msgspec

from gpucon.model.fleet import Health, MpsState
from gpucon.model.reading import Reading
from gpucon.sources.base import describe_error

NAME = "mps"
# what the daemon says when it is not running (the control program finds no daemon)
_NOT_RUNNING = ("cannot find mps control daemon", "not running", "connection refused")
_UNSET = frozenset({"", "none", "n/a", "not set"})


class DaemonDown(Exception):
    """The daemon is not running on its pipe directory (the machine answered)."""


class MpsReader(msgspec.Struct, frozen=True):
    """One daemon: ``ask(command)`` sends a control command and returns its stdout; it raises
    DaemonDown when no daemon runs there, anything else when the machine cannot be asked."""

    target: str
    ask: Callable[[str], str]
    device: str = "0"
    close: Callable[[], None] | None = None  # closes its connection (SSH)


def parse_pids(text: str) -> tuple[int, ...]:
    """PIDs from ``get_server_list``/``get_device_client_list`` (numbers; other words skipped)."""
    return tuple(int(token) for token in text.split() if token.isdigit())


_CLIENT = re.compile(r"^([0-9]+)(?:\.[0-9]+)?$")


def parse_clients(text: str) -> tuple[int, ...]:
    """Client PIDs from ``get_device_client_list SERVER``. Driver 580 answers a device line,
    then one ``PID.N`` per client (as read on the H200)::

        [0] 00:00.0, NVIDIA H200
        493.1
    """
    pids = []
    for line in text.splitlines():
        if line.lstrip().startswith("["):
            continue  # the device it lists clients of
        for token in line.split():
            match = _CLIENT.match(token.rstrip(","))
            if match:
                pids.append(int(match.group(1)))
    return tuple(pids)


def parse_percentage(text: str) -> float | None:
    """A percentage answer (``100.0``, ``60``); None when the daemon has none to give."""
    match = re.search(r"[0-9]+(\.[0-9]+)?", text)
    if match is None:
        return None
    value = float(match.group(0))
    return value if 0 < value <= 100 else None


def is_not_running(error_text: str) -> bool:
    text = error_text.lower()
    return any(phrase in text for phrase in _NOT_RUNNING)


def read_daemon(reader: MpsReader) -> MpsState:
    """The daemon's state through read commands only."""

    def ask(command: str) -> str:
        if not command.startswith("get_"):
            raise ValueError(f"the MPS source sends only read commands, not {command!r}")
        return reader.ask(command).strip()

    try:
        default = parse_percentage(ask("get_default_active_thread_percentage"))
    except DaemonDown:
        return MpsState(daemon_running=False)
    servers = parse_pids(ask("get_server_list"))
    shares = []
    clients = []
    for pid in servers:
        pct = parse_percentage(ask(f"get_active_thread_percentage {pid}"))
        if pct is not None:
            shares.append((str(pid), pct))
        clients.append((str(pid), parse_clients(ask(f"get_device_client_list {pid}"))))
    try:
        limit: str | None = ask(f"get_default_device_pinned_mem_limit {reader.device}")
    except DaemonDown:
        raise
    except Exception:  # an older driver has no pinned-memory limits: n/a
        limit = None
    return MpsState(
        daemon_running=True,
        default_thread_pct=default,
        thread_pct_by_server=tuple(shares),
        pinned_mem_limit=None if limit is None or limit.lower() in _UNSET else limit,
        clients_by_server=tuple(clients),
    )


class MpsSource:
    """Reads every configured daemon each ``cadence_s``, all together within ``timeout_s``."""

    def __init__(
        self, readers: Sequence[MpsReader], cadence_s: float = 5.0, timeout_s: float = 4.0
    ) -> None:
        self.name = NAME
        self.readers = tuple(readers)
        self.cadence_s = cadence_s
        self.timeout_s = timeout_s
        self._pool = ThreadPoolExecutor(
            max_workers=max(1, min(8, len(self.readers))), thread_name_prefix="gpucon-mps"
        )

    def read(self) -> Reading:
        started = time.time()
        perf = time.perf_counter()
        futures = {self._pool.submit(read_daemon, r): r for r in self.readers}
        done, late = wait(futures, timeout=self.timeout_s)
        states: list[tuple[str, MpsState]] = []
        problems: list[str] = []
        for future in done:
            reader = futures[future]
            error = future.exception()
            if error is None:
                states.append((reader.target, future.result()))
            else:
                problems.append(f"{reader.target}: {describe_error(error)}")
        for future in late:
            future.cancel()
            problems.append(f"{futures[future].target}: no answer within {self.timeout_s:g} s")
        health = Health.OK
        if problems:
            health = Health.DOWN if not states else Health.DEGRADED
        return Reading(
            source=self.name,
            health=health,
            taken_at=started,
            duration_s=time.perf_counter() - perf,
            error="; ".join(sorted(problems)) or None,
            mps=tuple(sorted(states)),
            round_trips=len(self.readers),
        )

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)
        for reader in self.readers:
            if reader.close is not None:
                reader.close()
