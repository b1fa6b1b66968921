"""ReadinessSource: asks every registered backend ``GET {url}/v2/health/ready`` (KServe v2).

A read: it changes nothing, so it runs in read-only mode too. The hub tells it, before each
read, which backends the other sources name and their urls (``observe_backends``). Checks go
out together with bounded concurrency, each with a short timeout, the whole read within
``timeout_s``; a check the deadline cuts off is not reported (that backend simply has no http
signal this round, and the next round starts with it). Each answer becomes a
``ReadyCheck``: ready on HTTP 200, otherwise not ready with the reason in short words
("refused", "timeout", "status 503"). An unchanged answer is the same object as last read,
so the hub's liveness judge sees nothing new.

The checks run on httpx's asyncio client inside the worker thread (one event loop per read),
so a slow backend costs a coroutine, not a thread.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Coroutine, Mapping
from typing import TypeVar

import httpx

from gpucon.model.fleet import Health
from gpucon.model.liveness import ReadyCheck
from gpucon.model.reading import Reading
from gpucon.sources.base import describe_error

READY_PATH = "/v2/health/ready"
T = TypeVar("T")


def _reason(exc: BaseException) -> str:
    """A failed check's reason in a few words (the full error is rarely more useful)."""
    if isinstance(exc, httpx.TimeoutException):
        return "timeout"
    text = str(exc).lower()
    if isinstance(exc, httpx.ConnectError):
        if "refused" in text or "all connection attempts failed" in text:
            return "refused"
        return "cannot connect"
    if isinstance(exc, httpx.RemoteProtocolError):
        return "connection dropped"
    return describe_error(exc)[:80]


def _run(coro: Coroutine[object, object, T]) -> T:
    """Run ``coro`` on a fresh event loop without waiting, at the end, for lookups still in
    the executor (``asyncio.run`` would: a host whose DNS hangs would hold the read)."""
    loop = asyncio.new_event_loop()
    try:
        return loop.run_until_complete(coro)
    finally:
        loop.run_until_complete(loop.shutdown_asyncgens())
        loop.close()  # its executor shuts down without waiting


class ReadinessSource:
    """Checks each backend's own readiness endpoint, many at a time, within a deadline."""

    name = "readiness"

    def __init__(
        self,
        cadence_s: float = 0.5,
        timeout_s: float = 0.5,
        request_timeout_s: float = 0.4,
        concurrency: int = 16,
        path: str = READY_PATH,
    ) -> None:
        self.cadence_s = cadence_s
        self.timeout_s = timeout_s
        self.request_timeout_s = min(request_timeout_s, timeout_s)
        self.concurrency = max(1, concurrency)
        self.path = path
        self._urls: dict[str, str] = {}
        self._last: dict[str, ReadyCheck] = {}
        self._last_checks: tuple[ReadyCheck, ...] = ()
        self._lock = threading.Lock()
        self._start = 0  # rotates, so a deadline never starves the same backends

    def observe_backends(self, urls: Mapping[str, str]) -> None:
        """The backends to check on the next read (name -> base url)."""
        self._urls = dict(urls)

    def read(self) -> Reading:
        started = time.time()
        perf = time.perf_counter()
        targets = sorted(self._urls.items())
        with self._lock:
            if targets:
                k = self._start % len(targets)
                targets = targets[k:] + targets[:k]
            begun: list[str] = []
            answers = _run(self._check_all(targets, begun)) if targets else {}
            if len(answers) < len(targets):  # next time, first those that never got a turn
                self._start += len(begun)
            checks = tuple(self._keep(name, *answers[name]) for name in sorted(answers))
            if len(checks) == len(self._last_checks) and all(
                a is b for a, b in zip(checks, self._last_checks, strict=True)
            ):
                checks = self._last_checks  # unchanged: the same tuple, nothing to re-index
            self._last_checks = checks
            self._last = {c.backend: c for c in checks}
        missed = len(targets) - len(answers)
        error = (
            f"{missed} of {len(targets)} backends not checked by the deadline" if missed else None
        )
        return Reading(
            source=self.name,
            health=Health.DEGRADED if missed else Health.OK,
            taken_at=started,
            duration_s=time.perf_counter() - perf,
            error=error,
            ready_checks=checks,
            round_trips=len(answers),
        )

    def _keep(self, name: str, ready: bool, error: str | None) -> ReadyCheck:
        last = self._last.get(name)
        if last is not None and last.ready == ready and last.error == error:
            return last
        return ReadyCheck(name, ready, error)

    async def _check_all(
        self, targets: list[tuple[str, str]], begun: list[str]
    ) -> dict[str, tuple[bool, str | None]]:
        """Answers by backend name; ``begun`` collects the checks that got a turn."""
        answers: dict[str, tuple[bool, str | None]] = {}
        gate = asyncio.Semaphore(self.concurrency)
        limits = httpx.Limits(max_connections=self.concurrency, max_keepalive_connections=0)
        timeout = httpx.Timeout(self.request_timeout_s)
        async with httpx.AsyncClient(timeout=timeout, limits=limits, trust_env=False) as client:

            async def one(name: str, url: str) -> None:
                async with gate:
                    begun.append(name)
                    answers[name] = await self._check(client, url)

            tasks = [asyncio.create_task(one(n, u)) for n, u in targets]
            # room left under timeout_s for the event loop and client to start and close
            deadline = max(0.05, self.timeout_s - 0.05)
            _, pending = await asyncio.wait(tasks, timeout=deadline) if tasks else ((), ())
            for t in pending:
                t.cancel()
            if pending:
                await asyncio.gather(*pending, return_exceptions=True)
        return answers

    async def _check(self, client: httpx.AsyncClient, url: str) -> tuple[bool, str | None]:
        try:
            r = await client.get(url.rstrip("/") + self.path)
        except Exception as exc:  # a malformed url from the registry is a failed check too
            return False, _reason(exc)
        if r.status_code == 200:
            return True, None
        return False, f"status {r.status_code}"

    def close(self) -> None:
        """Nothing held between reads: each read opens and closes its own client."""
