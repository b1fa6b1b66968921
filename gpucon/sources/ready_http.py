"""Keep-alive HTTP/1.1 GETs for the readiness checks, on one event loop kept for the source's life.

The checks used httpx, a new client (and a new connection) per read on a new event loop: at 56
backends every 0.5 s that was most of a console's CPU, and the checks fell behind their cadence.
Here a ``CheckPool`` keeps one asyncio loop in its own thread and, per backend ``scheme://host:
port``, the idle connections of earlier checks; a check borrows one (or opens one), writes one
GET and reads the answer through h11 (the HTTP/1.1 state machine httpx's transport uses): one
``h11.Connection`` per connection writes the request and parses the answer, any framing
(``Content-Length``, chunked); the connection is kept only when h11 can start a next cycle on
it (both sides DONE: not after ``Connection: close`` or an HTTP/1.0 answer). The status is all
a check needs, so an answer whose connection cannot be kept, or whose body passes 64 KiB, is
read no further and its connection closed; an answer h11 cannot parse is "bad http answer".

A pooled connection never hides a dead backend: a connection the peer closed (the backend was
killed, or restarted as a new process on the same port) is dropped as soon as the loop sees it
close, and a request that fails on a reused connection before any answer is tried once more on
a fresh one, within the same timeout, so a killed backend is "refused" on its next check,
exactly as with a new connection every time. A connection whose check failed or was cut off is
closed, never reused.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import errno
import ssl
import threading
from collections.abc import Coroutine
from typing import TypeVar
from urllib.parse import SplitResult, unquote, urlsplit

import h11

T = TypeVar("T")
MAX_HEAD_BYTES = 16 * 1024
MAX_KEPT_BODY_BYTES = 64 * 1024  # a longer answer is read no further: its connection is closed
# several backends may share a server (one per model it serves): as many as check at once
IDLE_PER_HOST = 16


class CheckError(Exception):
    """A failed check; ``reason`` is what the console shows ("refused", "timeout", ...)."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class _Dropped(Exception):
    """The peer closed the connection before a whole answer."""


def reason_of(exc: BaseException) -> str:
    """A failed check's reason in a few words (the full error is rarely more useful)."""
    if isinstance(exc, CheckError):
        return exc.reason
    if isinstance(exc, TimeoutError):
        return "timeout"
    if isinstance(exc, _Dropped):
        return "connection dropped"
    if isinstance(exc, ConnectionRefusedError):
        return "refused"
    if isinstance(exc, ssl.SSLError):  # an untrusted certificate, a failed handshake
        return "tls"
    text = str(exc).lower()
    if isinstance(exc, OSError):
        # several addresses (::1 and 127.0.0.1), every one refused: asyncio says so in a list
        if f"[errno {errno.ECONNREFUSED}]" in text or "refused" in text:
            return "refused"
        return "cannot connect"
    return f"{type(exc).__name__}: {exc}"[:80]


class _Answer(asyncio.Protocol):
    """One connection and its h11 state machine: one request at a time; ``closed`` once the
    peer is gone."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.closed = False
        self._h11 = h11.Connection(h11.CLIENT, max_incomplete_event_size=MAX_HEAD_BYTES)
        self._waiter: asyncio.Future[tuple[int, bool]] | None = None
        self._status = 0
        self._body = 0  # body bytes of this answer so far

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        w = self._waiter
        if w is not None and not w.done():
            w.set_exception(_Dropped())

    def ask(self, request: h11.Request) -> asyncio.Future[tuple[int, bool]]:
        """Send ``request``; the future gives (status, whether the connection may be kept)."""
        assert self.transport is not None
        self._status = self._body = 0
        self._waiter = asyncio.get_running_loop().create_future()
        if self.closed:  # lost before this request: it would never be answered
            self._waiter.set_exception(_Dropped())
        else:
            self.transport.write(self._h11.send(request) or b"")
            self._h11.send(h11.EndOfMessage())
        return self._waiter

    def data_received(self, data: bytes) -> None:
        w = self._waiter
        if w is None or w.done():  # nothing asked: an answer nobody wants, never reused
            self.close()
            return
        try:
            self._h11.receive_data(data)
            self._read(w)
        except h11.RemoteProtocolError:
            w.set_exception(CheckError("bad http answer"))

    def _read(self, w: asyncio.Future[tuple[int, bool]]) -> None:
        """The events in what came so far; ``w`` is set once the answer says all a check needs."""
        conn = self._h11
        while True:
            event = conn.next_event()
            if event is h11.NEED_DATA or event is h11.PAUSED:  # PAUSED: past the answer's end
                return
            if isinstance(event, h11.Response):
                self._status = event.status_code
                # the status is all a check needs: an answer whose connection cannot be kept
                # (Connection: close, HTTP/1.0, a body that ends when the server hangs up) is
                # not read further
                if conn.our_state is h11.MUST_CLOSE or not _framed(event):
                    w.set_result((self._status, False))
                    return
            elif isinstance(event, h11.Data):
                self._body += len(event.data)
                if self._body > MAX_KEPT_BODY_BYTES:  # read no further, the connection closed
                    w.set_result((self._status, False))
                    return
            elif isinstance(event, h11.EndOfMessage):
                # kept only if both sides are DONE (h11 says MUST_CLOSE otherwise) and nothing
                # came after the answer (a stray answer would be taken for the next one's)
                keep = not conn.trailing_data[0]
                if keep:
                    try:
                        conn.start_next_cycle()
                    except h11.LocalProtocolError:
                        keep = False
                w.set_result((self._status, keep))
                return
            # an InformationalResponse (1xx): the final answer follows

    def close(self) -> None:
        self.closed = True
        if self.transport is not None:
            self.transport.abort()


def _framed(answer: h11.Response) -> bool:
    """Whether a body's end is marked (no body, a length, chunks), not left to the server
    hanging up."""
    if answer.status_code in (204, 304):
        return True
    return any(name in (b"content-length", b"transfer-encoding") for name, _ in answer.headers)


class CheckPool:
    """The event loop and the idle connections, by ``scheme://host:port``, kept between reads."""

    def __init__(self) -> None:
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._idle: dict[str, list[_Answer]] = {}
        self._ssl: ssl.SSLContext | None = None
        self._requests: dict[str, tuple[str, str, int, h11.Request]] = {}

    def kept(self) -> int:
        """How many idle connections are kept for the next checks."""
        return sum(1 for conns in list(self._idle.values()) for c in conns if not c.closed)

    def run(self, coro: Coroutine[object, object, T], timeout_s: float) -> T:
        """Run ``coro`` on the pool's loop (started on first use) and wait for it."""
        if self._loop is None:
            self._loop = asyncio.new_event_loop()
            self._thread = threading.Thread(
                target=self._loop.run_forever, name="gpucon-readiness", daemon=True
            )
            self._thread.start()
        future = asyncio.run_coroutine_threadsafe(coro, self._loop)
        try:
            return future.result(timeout_s)
        except TimeoutError:
            future.cancel()
            raise

    async def get(self, url: str) -> int:
        """GET ``url``: its HTTP status, or CheckError/OSError/TimeoutError (no timeout here:
        the caller bounds it)."""
        key, host, port, request = self._request(url)
        idle = self._idle.get(key)
        while idle:
            conn = idle.pop()
            if conn.closed:
                continue
            try:
                return await self._ask(key, conn, request)
            except _Dropped:
                break  # closed by the peer while idle (killed, restarted): a new connection says
        conn = await self._open(key, host, port)
        return await self._ask(key, conn, request)

    async def _ask(self, key: str, conn: _Answer, request: h11.Request) -> int:
        try:
            status, keep = await conn.ask(request)
        except BaseException:
            conn.close()  # failed or cut off: what it would say next is unknown
            raise
        if keep and not conn.closed:
            idle = self._idle.setdefault(key, [])
            if len(idle) < IDLE_PER_HOST:
                idle.append(conn)
                return status
        conn.close()
        return status

    async def _open(self, key: str, host: str, port: int) -> _Answer:
        context = None
        if key.startswith("https:"):
            if self._ssl is None:
                self._ssl = ssl.create_default_context()
            context = self._ssl
        loop = asyncio.get_running_loop()
        _, conn = await loop.create_connection(
            _Answer, host, port, ssl=context, server_hostname=host if context else None
        )
        return conn

    def _request(self, url: str) -> tuple[str, str, int, h11.Request]:
        """(pool key, host, port, request) for ``url``, worked out once per url."""
        known = self._requests.get(url)
        if known is None:
            known = self._requests[url] = _build_request(urlsplit(url))
            if len(self._requests) > 100_000:  # the registry churns names: never unbounded
                self._requests.clear()
        return known

    def retain(self, urls: list[str]) -> None:
        """On the loop: close the kept connections to servers no url here names (a backend the
        registry no longer lists, or one that moved)."""
        wanted = set()
        for url in urls:
            with contextlib.suppress(CheckError):
                wanted.add(self._request(url)[0])
        for key in [k for k in self._idle if k not in wanted]:
            for conn in self._idle.pop(key):
                conn.close()

    def close(self) -> None:
        """Close every kept connection and stop the loop."""
        loop, thread = self._loop, self._thread
        self._loop = self._thread = None
        if loop is None:
            return

        def shut() -> None:
            for conns in self._idle.values():
                for conn in conns:
                    conn.close()
            self._idle.clear()
            loop.stop()

        loop.call_soon_threadsafe(shut)
        if thread is not None:
            thread.join(timeout=2.0)
        if not loop.is_running():
            with contextlib.suppress(Exception):
                loop.close()


def _build_request(parts: SplitResult) -> tuple[str, str, int, h11.Request]:
    if parts.scheme not in ("http", "https"):
        raise CheckError(f"unsupported url scheme {parts.scheme!r}"[:80])
    host = parts.hostname
    if not host:
        raise CheckError("url has no host")
    try:
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError as exc:
        raise CheckError("bad port in url") from exc
    target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    netloc = parts.netloc.rpartition("@")[2]
    headers = [(b"Host", netloc.encode()), (b"Accept", b"*/*"), (b"User-Agent", b"gpucon")]
    if parts.username is not None:
        creds = f"{unquote(parts.username)}:{unquote(parts.password or '')}"
        headers.append((b"Authorization", b"Basic " + base64.b64encode(creds.encode())))
    try:
        request = h11.Request(method=b"GET", target=target.encode(), headers=headers)
    except h11.LocalProtocolError as exc:  # a target or host h11 will not put on the wire
        raise CheckError("bad url") from exc
    return f"{parts.scheme}://{host}:{port}", host, port, request
