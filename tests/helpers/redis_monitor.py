"""Redis's own record of what a client sent: ``MONITOR`` (every command the server executes,
with the connection's address), ``CLIENT LIST`` (addresses to client names), ``COMMAND INFO``
(which commands write) and ``INFO commandstats`` (server-wide counts, scripts included).

Used by the read-only proofs: a console (in a terminal or served to a browser) sends no write.
"""

from __future__ import annotations

import threading
import uuid
from typing import Any

import redis


class RecorderDied(AssertionError):
    """The MONITOR connection ended before the test stopped it: what it saw is incomplete."""


class CommandRecorder:
    """Collects (client address, command name) for every command Redis executes.

    The MONITOR connection has no socket timeout (an idle feed is not an error); the recorder
    is stopped by a sentinel command that it sees in the feed itself, so every command the
    server ran before ``__exit__`` has been recorded when it returns. If the feed ends any
    other way the recorder is dead, and every later use of it raises ``RecorderDied``.
    """

    def __init__(self, url: str) -> None:
        self.url = url
        self.client = redis.Redis.from_url(url, socket_timeout=None)
        self.seen: list[tuple[str, str]] = []
        self.addresses: dict[str, str] = {}  # addr -> client name
        self.sentinel = f"gpucon-recorder-stop-{uuid.uuid4().hex}"
        self.error: BaseException | None = None
        self._started = threading.Event()
        self._stopped = False
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._names = redis.Redis.from_url(url, decode_responses=True, socket_timeout=10)

    def __enter__(self) -> CommandRecorder:
        self._thread.start()
        assert self._started.wait(10), "MONITOR did not start"
        self.check()
        return self

    def __exit__(self, *exc: object) -> None:
        stopper = redis.Redis.from_url(self.url, socket_timeout=10)
        stopper.echo(self.sentinel)  # the feed's last entry: everything before it is recorded
        stopper.close()
        self._thread.join(timeout=30)
        self._names.close()
        if self._thread.is_alive():
            raise RecorderDied("the recorder never saw its stop sentinel")
        self._stopped = True
        self.client.close()
        self.check()

    def check(self) -> None:
        if self.error is not None:
            raise RecorderDied(f"MONITOR feed ended early: {self.error!r}") from self.error
        if self._started.is_set() and not self._thread.is_alive() and not self._stopped:
            raise RecorderDied("MONITOR feed ended early")

    def note_clients(self) -> None:
        self.check()
        for c in self._names.client_list():
            self.addresses[c["addr"]] = c.get("name", "")

    def _run(self) -> None:
        client: Any = self.client
        try:
            with client.monitor() as monitor:
                self._started.set()
                while True:
                    info = monitor.next_command()
                    if self.sentinel in str(info["command"]):
                        return
                    command = str(info["command"]).split(" ", 1)[0].strip('"').lower()
                    address = f"{info.get('client_address', '')}:{info.get('client_port', '')}"
                    self.seen.append((address, command))
        except BaseException as exc:  # recorded and raised by check(): a dead recorder fails
            self.error = exc
            self._started.set()

    def commands_of(self, name: str) -> list[str]:
        self.check()
        ours = {addr for addr, n in self.addresses.items() if n == name}
        return [cmd for addr, cmd in self.seen if addr in ours]


# scripts and transactions that could carry writes (EVAL_RO/EVALSHA_RO cannot)
MAY_WRITE = {"eval", "evalsha", "fcall", "multi", "exec", "script", "function", "publish"}


def writing_commands(client: redis.Redis, commands: set[str]) -> set[str]:
    """The commands of ``commands`` that write or may write, by Redis's own command table."""
    bad: set[str] = set()
    for cmd in commands:
        base = cmd.split("|", 1)[0]
        raw: Any = client.execute_command("COMMAND", "INFO", base)  # type: ignore[no-untyped-call]
        info = raw.get(base) if isinstance(raw, dict) else None
        assert info, f"Redis does not know {cmd!r}"
        flags = set(info["flags"]) | set(info["acl_categories"])
        if flags & {"write", "may_replicate", "@write"} or base in MAY_WRITE:
            bad.add(cmd)
    return bad


def command_calls(client: redis.Redis) -> dict[str, int]:
    """INFO commandstats: calls per command (``xinfo|groups`` style names), server-wide."""
    stats: Any = client.info("commandstats")
    return {k.removeprefix("cmdstat_"): int(v["calls"]) for k, v in stats.items()}


def dump(client: redis.Redis) -> dict[str, Any]:
    c: Any = client
    state: dict[str, Any] = {}
    for key in sorted(c.keys("*")):
        kind = c.type(key)
        if kind == "hash":
            state[key] = c.hgetall(key)
        elif kind == "string":
            state[key] = c.get(key)
        elif kind == "set":
            state[key] = sorted(c.smembers(key))
        elif kind == "stream":
            state[key] = (c.xlen(key), c.xinfo_groups(key))
    return state
