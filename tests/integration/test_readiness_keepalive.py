"""The readiness checks' kept connections never hide a dead backend (real servers on loopback).

A lab backend (a real ``gpucon backend`` process) killed with SIGKILL while the source keeps an
idle connection to it is "refused" on the very next check, as on a new connection; restarted
on the same port it is ready on the next check. A server that closes its keep-alive
connections after each answer, or speaks HTTP/1.0, is ready on every check (never
"connection dropped"), and one that keeps them open is asked over the same connection.
"""

from __future__ import annotations

import os
import signal
import socketserver
import threading
import time
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import httpx
import pytest

from gpucon.sources.readiness import ReadinessSource
from tests.helpers.lab_stack import start_lab

pytestmark = pytest.mark.integration


def answers(source: ReadinessSource) -> dict[str, tuple[bool, str | None]]:
    return {c.backend: (c.ready, c.error) for c in source.read().ready_checks}


def wait_for(check: Callable[[], bool], timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: not within {timeout_s:.0f}s")
        time.sleep(0.05)


def test_a_killed_backend_is_refused_on_the_next_check_not_hidden_by_a_kept_connection(
    redis_url: str, tmp_path: Path
) -> None:
    with start_lab(redis_url, tmp_path / "lab", backends=2, scheduler=False) as stack:
        b0, b1 = stack.backends
        source = ReadinessSource(timeout_s=1.0, request_timeout_s=0.4)
        try:
            source.observe_backends({b0.name: b0.url, b1.name: b1.url})
            for _ in range(3):
                assert answers(source) == {b0.name: (True, None), b1.name: (True, None)}
            assert source.kept_connections == 2  # one per backend, reused read after read

            proc = next(p for p in stack.processes if p.name == b1.name)
            assert proc.proc is not None
            os.kill(proc.proc.pid, signal.SIGKILL)
            proc.proc.wait(timeout=10)
            # at once: its kept connection may not even be seen closed yet
            assert answers(source) == {b0.name: (True, None), b1.name: (False, "refused")}
            assert answers(source)[b1.name] == (False, "refused")
            assert source.kept_connections == 1

            proc.start()  # a new process on the same port
            wait_for(lambda: _ready(b1.url), 20, "restarted backend")
            assert answers(source) == {b0.name: (True, None), b1.name: (True, None)}
            assert source.kept_connections == 2
            # a backend no longer named: its kept connection is closed on the next read
            source.observe_backends({b0.name: b0.url})
            assert answers(source) == {b0.name: (True, None)}
            assert source.kept_connections == 1
        finally:
            source.close()
        assert source.kept_connections == 0


def _ready(url: str) -> bool:
    try:
        return httpx.get(f"{url}/v2/health/ready", timeout=1.0).status_code == 200
    except httpx.HTTPError:
        return False


class _Handler(BaseHTTPRequestHandler):
    """200 on every GET; ``server.hang_up`` closes each connection after its answer while the
    answer says nothing of it (HTTP/1.1 keep-alive assumed), as a proxy's idle timeout does."""

    def do_GET(self) -> None:
        self.send_response(200)
        self.send_header("Content-Length", "2")
        self.end_headers()
        self.wfile.write(b"ok")
        self.wfile.flush()
        if getattr(self.server, "hang_up", False):
            self.close_connection = True

    def log_message(self, format: str, *args: object) -> None:
        pass


def _serve(protocol: str, hang_up: bool) -> Iterator[str]:
    handler = type("H", (_Handler,), {"protocol_version": protocol})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.hang_up = hang_up  # type: ignore[attr-defined]
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


@pytest.fixture
def hangs_up() -> Iterator[str]:
    yield from _serve("HTTP/1.1", hang_up=True)


@pytest.fixture
def http10() -> Iterator[str]:
    yield from _serve("HTTP/1.0", hang_up=False)


@pytest.fixture
def keeps() -> Iterator[str]:
    yield from _serve("HTTP/1.1", hang_up=False)


def test_servers_that_close_kept_connections_are_ready_on_every_check(
    hangs_up: str, http10: str, keeps: str
) -> None:
    source = ReadinessSource(timeout_s=5.0, request_timeout_s=4.0)
    try:
        source.observe_backends({"hangs-up": hangs_up, "http10": http10, "keeps": keeps})
        for _ in range(20):
            assert answers(source) == {
                "hangs-up": (True, None),
                "http10": (True, None),
                "keeps": (True, None),
            }
        # the HTTP/1.0 server's connections are never kept; the others may be, briefly
        assert 1 <= source.kept_connections <= 2
    finally:
        source.close()


def test_an_https_backend_is_checked_over_tls_and_kept(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """TLS with the system's trust (``SSL_CERT_FILE`` names a test CA here): trusted, ready and
    its connection kept; a server whose certificate no CA vouches for is not ready."""
    import ssl

    import trustme

    ca, stranger = trustme.CA(), trustme.CA()
    ca.cert_pem.write_to_path(str(tmp_path / "ca.pem"))
    monkeypatch.setenv("SSL_CERT_FILE", str(tmp_path / "ca.pem"))
    servers: list[ThreadingHTTPServer] = []
    urls = {}
    for name, issuer in (("trusted", ca), ("untrusted", stranger)):
        handler = type("H", (_Handler,), {"protocol_version": "HTTP/1.1"})
        server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        issuer.issue_cert("127.0.0.1").configure_cert(context)
        server.socket = context.wrap_socket(server.socket, server_side=True)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        servers.append(server)
        urls[name] = f"https://127.0.0.1:{server.server_address[1]}"
    source = ReadinessSource(timeout_s=5.0, request_timeout_s=4.0)
    try:
        source.observe_backends(urls)
        for _ in range(3):
            assert answers(source) == {"trusted": (True, None), "untrusted": (False, "tls")}
        assert source.kept_connections == 1
    finally:
        source.close()
        for server in servers:
            server.shutdown()
            server.server_close()


class _Chunked(BaseHTTPRequestHandler):
    """200 with a chunked body, in two writes (``server.big``: over 64 KiB); counts the
    connections it is asked over."""

    protocol_version = "HTTP/1.1"

    def setup(self) -> None:
        super().setup()
        self.server.connections += 1  # type: ignore[attr-defined]

    def do_GET(self) -> None:
        self.send_response(200)
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        self.wfile.write(b"5\r\nready\r\n")
        self.wfile.flush()
        if getattr(self.server, "big", False):  # 80 KiB more: past what a check reads
            self.wfile.write(b"14000\r\n" + b"x" * 0x14000 + b"\r\n")
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()

    def log_message(self, format: str, *args: object) -> None:
        pass


class _Garbled(socketserver.BaseRequestHandler):
    """Answers every request with a status line that is not HTTP's."""

    def handle(self) -> None:
        self.request.recv(4096)
        self.request.sendall(b"HTTP/1.1 2OO OK\r\nContent-Length: 2\r\n\r\nok")
        self.request.recv(4096)  # until the client hangs up


def test_a_chunked_answer_is_read_and_its_connection_kept_unless_too_long() -> None:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Chunked)
    server.connections = 0  # type: ignore[attr-defined]
    threading.Thread(target=server.serve_forever, daemon=True).start()
    source = ReadinessSource(timeout_s=5.0, request_timeout_s=4.0)
    try:
        source.observe_backends({"chunked": f"http://127.0.0.1:{server.server_address[1]}"})
        for _ in range(5):
            assert answers(source) == {"chunked": (True, None)}
        assert source.kept_connections == 1
        assert server.connections == 1  # type: ignore[attr-defined]
        # a body past 64 KiB is read no further: still ready, its connection closed
        server.big = True  # type: ignore[attr-defined]
        for _ in range(2):
            assert answers(source) == {"chunked": (True, None)}
            assert source.kept_connections == 0
    finally:
        source.close()
        server.shutdown()
        server.server_close()


def test_a_malformed_status_line_is_a_bad_http_answer_and_its_connection_closed() -> None:
    server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), _Garbled)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    source = ReadinessSource(timeout_s=5.0, request_timeout_s=4.0)
    try:
        source.observe_backends({"garbled": f"http://127.0.0.1:{server.server_address[1]}"})
        for _ in range(2):
            assert answers(source) == {"garbled": (False, "bad http answer")}
            assert source.kept_connections == 0
    finally:
        source.close()
        server.shutdown()
        server.server_close()
