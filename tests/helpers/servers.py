"""Start real servers on loopback for tests: free ports, waiting until a server answers."""

from __future__ import annotations

import contextlib
import shutil
import socket
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TypeVar

T = TypeVar("T")


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_until(check: Callable[[], bool], timeout_s: float = 10.0, what: str = "server") -> None:
    deadline = time.monotonic() + timeout_s
    last: Exception | None = None
    while time.monotonic() < deadline:
        try:
            if check():
                return
        except Exception as exc:  # the server is not up yet
            last = exc
        time.sleep(0.05)
    raise TimeoutError(f"{what} did not come up in {timeout_s:.0f}s (last error: {last})")


def poll_until(
    read: Callable[[], T], check: Callable[[T], bool], timeout_s: float, every_s: float = 0.2
) -> T:
    """``read()`` again every ``every_s`` until ``check`` holds of what it read; that value
    (an AssertionError naming the last one read after ``timeout_s``)."""
    deadline = time.monotonic() + timeout_s
    value = read()
    while not check(value):
        assert time.monotonic() < deadline, f"not reached in {timeout_s}s: {value!r:.300}"
        time.sleep(every_s)
        value = read()
    return value


class RedisProcess:
    """A real ``redis-server`` that a test can kill and start again on the same port; its
    data survives (append-only file, fsync on every write)."""

    def __init__(self, tmp_dir: Path) -> None:
        binary = shutil.which("redis-server")
        if binary is None:
            raise RuntimeError("redis-server is not installed (apt-get install -y redis-server)")
        self.binary = binary
        self.dir = tmp_dir
        self.port = free_port()
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> float:
        """Start the server; returns when it answers PING (the time.monotonic() of that)."""
        self.proc = subprocess.Popen(
            [
                self.binary,
                "--bind",
                "127.0.0.1",
                "--port",
                str(self.port),
                "--save",
                "",
                "--appendonly",
                "yes",
                "--appendfsync",
                "always",
                "--dir",
                str(self.dir),
                "--protected-mode",
                "yes",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        import redis

        client = redis.Redis(host="127.0.0.1", port=self.port, socket_timeout=0.5)
        try:
            wait_until(lambda: bool(client.ping()), what="redis-server")
        finally:
            client.close()
        return time.monotonic()

    def kill(self) -> float:
        """SIGKILL the server and wait for it to be gone (the time.monotonic() of that)."""
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait(timeout=5)
            self.proc = None
        return time.monotonic()

    def __enter__(self) -> RedisProcess:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.kill()


@contextlib.contextmanager
def redis_server(tmp_dir: Path) -> Iterator[str]:
    """A real ``redis-server`` on a free loopback port; yields its URL."""
    binary = shutil.which("redis-server")
    if binary is None:
        raise RuntimeError("redis-server is not installed (apt-get install -y redis-server)")
    port = free_port()
    proc = subprocess.Popen(
        [
            binary,
            "--bind",
            "127.0.0.1",
            "--port",
            str(port),
            "--save",
            "",
            "--appendonly",
            "no",
            "--dir",
            str(tmp_dir),
            "--protected-mode",
            "yes",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        import redis

        client = redis.Redis(host="127.0.0.1", port=port, socket_timeout=1.0)
        wait_until(lambda: bool(client.ping()), what="redis-server")
        client.close()
        yield f"redis://127.0.0.1:{port}/0"
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            proc.kill()
