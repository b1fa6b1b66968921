"""A minimal HTTP/1.1 server on asyncio streams: enough for the lab's KServe v2 backends.

Handles keep-alive, ``Content-Length`` bodies (no chunked uploads: clients of a KServe v2 server
send sized JSON) and bounded header/body sizes. The application is one async callable that
maps a :class:`Request` to a :class:`Response`.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from http import HTTPStatus

MAX_HEADER_BYTES = 16 * 1024
MAX_BODY_BYTES = 8 * 1024 * 1024
IDLE_TIMEOUT_S = 30.0


@dataclass(frozen=True, slots=True)
class Request:
    method: str
    path: str
    headers: dict[str, str]
    body: bytes

    def json(self) -> object:
        return json.loads(self.body or b"null")


@dataclass(frozen=True, slots=True)
class Response:
    status: int = 200
    body: bytes = b""
    content_type: str = "application/json"
    headers: dict[str, str] = field(default_factory=dict)

    @classmethod
    def of_json(cls, status: int, payload: object) -> Response:
        return cls(status=status, body=json.dumps(payload).encode())

    @classmethod
    def text(cls, status: int, text: str, content_type: str = "text/plain") -> Response:
        return cls(status=status, body=text.encode(), content_type=content_type)


Handler = Callable[[Request], Awaitable[Response]]


class BadRequest(Exception):
    pass


async def _read_request(reader: asyncio.StreamReader) -> Request | None:
    try:
        head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), IDLE_TIMEOUT_S)
    except (asyncio.IncompleteReadError, TimeoutError, ConnectionError):
        return None
    except asyncio.LimitOverrunError as exc:
        raise BadRequest("headers too large") from exc
    if len(head) > MAX_HEADER_BYTES:
        raise BadRequest("headers too large")
    lines = head.decode("latin-1").split("\r\n")
    parts = lines[0].split(" ")
    if len(parts) != 3 or not parts[2].startswith("HTTP/1."):
        raise BadRequest("bad request line")
    method, target, _version = parts
    headers: dict[str, str] = {}
    for line in lines[1:]:
        if not line:
            continue
        name, sep, value = line.partition(":")
        if not sep:
            raise BadRequest("bad header line")
        headers[name.strip().lower()] = value.strip()
    if headers.get("transfer-encoding", "").lower() == "chunked":
        raise BadRequest("chunked request bodies are not supported")
    try:
        length = int(headers.get("content-length", "0"))
    except ValueError as exc:
        raise BadRequest("bad content-length") from exc
    if length < 0 or length > MAX_BODY_BYTES:
        raise BadRequest("body too large")
    body = await reader.readexactly(length) if length else b""
    path = target.split("?", 1)[0]
    return Request(method=method.upper(), path=path, headers=headers, body=body)


def _encode(response: Response, keep_alive: bool) -> bytes:
    reason = HTTPStatus(response.status).phrase
    head = [
        f"HTTP/1.1 {response.status} {reason}",
        f"Content-Type: {response.content_type}",
        f"Content-Length: {len(response.body)}",
        f"Connection: {'keep-alive' if keep_alive else 'close'}",
    ]
    head += [f"{k}: {v}" for k, v in response.headers.items()]
    return ("\r\n".join(head) + "\r\n\r\n").encode("latin-1") + response.body


async def serve_connection(
    handler: Handler, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
) -> None:
    """Serve requests on one connection until the peer closes it or asks to."""
    try:
        while True:
            try:
                request = await _read_request(reader)
            except BadRequest as exc:
                writer.write(_encode(Response.of_json(400, {"error": str(exc)}), False))
                await writer.drain()
                return
            except asyncio.IncompleteReadError:
                return
            if request is None:
                return
            try:
                response = await handler(request)
            except Exception as exc:  # a handler bug answers 500, it never kills the server
                response = Response.of_json(500, {"error": f"{type(exc).__name__}: {exc}"})
            keep_alive = request.headers.get("connection", "").lower() != "close"
            writer.write(_encode(response, keep_alive))
            await writer.drain()
            if not keep_alive:
                return
    except ConnectionError:
        return
    finally:
        writer.close()
        with contextlib.suppress(Exception):
            await writer.wait_closed()


class HttpServer:
    """A listening server that also closes its open keep-alive connections on ``close``."""

    def __init__(self, handler: Handler) -> None:
        self._handler = handler
        self._server: asyncio.Server | None = None
        self._connections: set[asyncio.Task[None]] = set()
        self.port = 0

    async def start(self, host: str, port: int) -> None:
        self._server = await asyncio.start_server(
            self._on_connect, host, port, limit=MAX_HEADER_BYTES * 2
        )
        self.port = int(self._server.sockets[0].getsockname()[1])

    async def _on_connect(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._connections.add(task)
        try:
            await serve_connection(self._handler, reader, writer)
        except asyncio.CancelledError:
            pass
        finally:
            self._connections.discard(task)

    async def close(self) -> None:
        if self._server is None:
            return
        self._server.close()
        for task in list(self._connections):
            task.cancel()
        if self._connections:
            await asyncio.gather(*self._connections, return_exceptions=True)
        await self._server.wait_closed()
