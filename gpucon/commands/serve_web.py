"""The web side of ``gpucon serve``: textual-serve's server, bounded in viewers, with a page
that survives what wall screens meet.

textual-serve starts one console process per browser connection (about 70 MB each, see
``benchmarks/serve_viewers.py``). ``WallServer`` counts the connections and refuses the one
past ``max_viewers`` (after a short grace, so that a reloading page gets its own place back):
its WebSocket is closed with ``FULL_CLOSE`` and a sentence the page shows, and the page waits
for a place by itself (``/healthz`` says how many are taken).

The page (``serve_page/app_index.html``) differs from textual-serve's own: it asks for nothing
outside this server (no web fonts from the internet: a wall is often offline), builds its
WebSocket address from where the browser found it (so it works behind a reverse proxy, under a
sub-path too), and when the connection drops — server restart, network, the console exiting —
it dims the last frame under a banner that says since when it is frozen, and reloads once the
server answers again.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import aiohttp_jinja2
from aiohttp import web
from textual_serve.app_service import AppService
from textual_serve.server import Server

from gpucon.commands.serve_origin import OriginPolicy

log = logging.getLogger("gpucon.serve")

PAGE_DIR = Path(__file__).with_name("serve_page")
# WebSocket close codes 4000-4999 are the application's; the page knows these two
FULL_CLOSE = 4001
ENDED_CLOSE = 4002
STOP_TIMEOUT_S = 3.0  # a read-only console has nothing to finish: it quits in well under 1 s
# a reloading page asks for its new connection while its old one may still count: a full wall
# waits this long for a place before it says it is full
RELOAD_GRACE_S = 1.0


class _Viewer(AppService):
    """One browser's console process; the browser's connection is closed when the process
    ends by itself (crashed, refused its config), so the page says so instead of freezing."""

    async def run(self) -> None:
        await super().run()
        await self.remote_close()

    async def stop_within(self, timeout_s: float) -> None:
        """Ask the console to quit; kill it if it has not within ``timeout_s`` (a hung
        process must not live on unseen). Its exit is what counts: textual-serve's reader
        swallows the cancellation, so a timed-out ``stop()`` may look finished."""
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self.stop(), timeout_s)
        process = self._process
        if process is None:
            return
        try:
            await asyncio.wait_for(process.wait(), 1.0)
        except TimeoutError:
            log.warning("a console did not quit in %.0f s: killed", timeout_s)
            process.kill()
            await process.wait()


class WallServer(Server):
    """textual-serve's Server with a bound on viewers and gpucon's page."""

    def __init__(
        self,
        command: str,
        *,
        host: str,
        port: int,
        max_viewers: int,
        title: str,
        policy: OriginPolicy,
        banner: list[str] | None = None,
    ) -> None:
        super().__init__(command, host=host, port=port, title=title, templates_path=PAGE_DIR)
        self.policy = policy
        self.max_viewers = max_viewers
        self.viewers = 0
        self.banner = banner or []
        self._sockets: set[web.WebSocketResponse] = set()

    def initialize_logging(self) -> None:
        # plain lines on stderr: textual-serve's rich tracebacks print local variables, which
        # may hold a config's credentials
        logging.basicConfig(
            level=logging.DEBUG if self.debug else logging.INFO,
            format="%(asctime)s %(name)s %(levelname)s %(message)s",
            stream=sys.stderr,
        )

    async def on_startup(self, app: web.Application) -> None:
        for line in self.banner:
            print(line, file=sys.stderr, flush=True)

    async def on_shutdown(self, app: web.Application) -> None:
        # close the browsers' connections now (each stops its console), or aiohttp would wait
        # out its shutdown timeout on them; "going away" makes the pages wait for the restart
        for socket in list(self._sockets):
            await socket.close(code=1001, message=b"gpucon serve is restarting")

    @property
    def full(self) -> bool:
        return self.viewers >= self.max_viewers

    async def still_full(self) -> bool:
        """Whether the wall is full after waiting up to ``RELOAD_GRACE_S`` for a place."""
        deadline = asyncio.get_running_loop().time() + RELOAD_GRACE_S
        while self.full and asyncio.get_running_loop().time() < deadline:
            await asyncio.sleep(0.05)
        return self.full

    async def _make_app(self) -> web.Application:
        app = await super()._make_app()
        app.router.add_get("/healthz", self.handle_health)
        app.middlewares.append(self.check_host)
        return app

    @web.middleware
    async def check_host(
        self, request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
    ) -> web.StreamResponse:
        """Every request: addressed to this wall (serve_origin.py says why)."""
        if not self.policy.host_ok(request.headers.get("Host")):
            log.warning("refused a request for host %r (--allow-origin)", request.host)
            raise web.HTTPMisdirectedRequest(text="gpucon serve: unknown host (--allow-origin)\n")
        return await handler(request)

    async def handle_health(self, request: web.Request) -> web.Response:
        """For the page's reconnect and for a proxy's health check: up, and how full."""
        state = {"viewers": self.viewers, "max_viewers": self.max_viewers, "full": self.full}
        return web.json_response(state, headers={"Cache-Control": "no-store"})

    async def handle_index(self, request: web.Request) -> web.Response:  # type: ignore[override]
        # always the page, full or not: a reloading browser keeps its old connection open
        # until the new page arrives, so only the WebSocket can tell a reload from a newcomer
        context: dict[str, Any] = {
            "title": self.title,
            "font_size": _int(request.query.get("fontsize", "16"), 16, 6, 64),
            "full_code": FULL_CLOSE,
            "ended_code": ENDED_CLOSE,
        }
        response = aiohttp_jinja2.render_template("app_index.html", request, context)
        response.headers["Cache-Control"] = "no-store"
        return response

    async def handle_websocket(self, request: web.Request) -> web.WebSocketResponse:
        origin = request.headers.get("Origin")
        if not self.policy.origin_ok(origin, request.headers.get("Host")):
            log.warning("refused a viewer from origin %r (--allow-origin)", origin)
            raise web.HTTPForbidden(text="gpucon serve: this page may not watch the wall\n")
        websocket = web.WebSocketResponse(heartbeat=15)
        await websocket.prepare(request)
        if await self.still_full():
            log.warning("viewer refused: %d viewers already (--max-viewers)", self.viewers)
            # a close reason holds at most 123 bytes
            reason = f"This wall is full: {self.viewers} viewers, its limit. Waiting for a place."
            await websocket.close(code=FULL_CLOSE, message=reason.encode())
            return websocket
        self.viewers += 1
        self._sockets.add(websocket)
        log.info("viewer connected (%d of at most %d)", self.viewers, self.max_viewers)
        viewer: _Viewer | None = None
        try:
            width = _int(request.query.get("width", "80"), 80, 20, 1000)
            height = _int(request.query.get("height", "24"), 24, 5, 500)

            async def close() -> None:
                await websocket.close(code=ENDED_CLOSE, message=b"the console ended")

            viewer = _Viewer(
                self.command,
                write_bytes=websocket.send_bytes,
                write_str=websocket.send_str,
                close=close,
                download_manager=self.download_manager,
                debug=self.debug,
            )
            await viewer.start(width, height)
            await self._process_messages(websocket, viewer)
        except asyncio.CancelledError:
            await websocket.close()
        except Exception:
            log.exception("viewer connection failed")
        finally:
            # the place is free as soon as the browser is gone: a reloading page (its new
            # connection may arrive while the old console is still quitting) is not refused
            self._sockets.discard(websocket)
            self.viewers -= 1
            log.info("viewer gone (%d left)", self.viewers)
            if viewer is not None:
                await viewer.stop_within(STOP_TIMEOUT_S)
        return websocket


def _int(text: str, default: int, low: int, high: int) -> int:
    try:
        return min(max(int(text), low), high)
    except ValueError:
        return default
