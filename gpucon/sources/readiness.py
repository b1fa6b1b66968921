"""ReadinessSource: asks every registered backend ``GET {url}/v2/health/ready`` (KServe v2).

A read: it changes nothing, so it runs in read-only mode too. The hub tells it, before each
read, which backends the other sources name and their urls (``observe_backends``). Checks go
out together with bounded concurrency, each with a short timeout, the whole read within
``timeout_s``; a check the deadline cuts off is not reported (that backend simply has no http
signal this round, and the next round starts with it). Each answer becomes a
``ReadyCheck``: ready on HTTP 200, otherwise not ready with the reason in short words
("refused", "timeout", "status 503"). An unchanged answer is the same object as last read,
so the hub's liveness judge sees nothing new.

The checks run on one event loop kept for the source's life in its own thread, over keep-alive
connections kept between reads (``gpucon.sources.ready_http``): a slow backend costs a
coroutine, not a thread, and a check a socket write and read, not a new connection. A killed
or restarted backend is seen as on a new connection: its pooled one is dropped when the peer
closes it, and a request that fails on a reused connection is tried once on a fresh one.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Mapping

from gpucon.model.fleet import Health
from gpucon.model.liveness import ReadyCheck
from gpucon.model.reading import Reading
from gpucon.sources.ready_http import CheckPool, reason_of

READY_PATH = "/v2/health/ready"


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
        self._pool = CheckPool()

    @property
    def kept_connections(self) -> int:
        """Connections kept open between reads, for the next checks."""
        return self._pool.kept()

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
            # no backends but connections still kept: one run closes them
            answers = self._run(targets, begun) if targets or self._pool.kept() else {}
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

    def _run(
        self, targets: list[tuple[str, str]], begun: list[str]
    ) -> dict[str, tuple[bool, str | None]]:
        try:  # the loop's own deadline ends it; this margin is for a loop held up elsewhere
            return self._pool.run(self._check_all(targets, begun), self.timeout_s + 1.0)
        except TimeoutError:
            return {}

    async def _check_all(
        self, targets: list[tuple[str, str]], begun: list[str]
    ) -> dict[str, tuple[bool, str | None]]:
        """Answers by backend name; ``begun`` collects the checks that got a turn."""
        answers: dict[str, tuple[bool, str | None]] = {}
        gate = asyncio.Semaphore(self.concurrency)

        async def one(name: str, url: str) -> None:
            async with gate:
                begun.append(name)
                answers[name] = await self._check(url)

        tasks = [asyncio.create_task(one(n, u)) for n, u in targets]
        # room left under timeout_s for handing the read to the loop's thread and back
        deadline = max(0.05, self.timeout_s - 0.02)
        _, pending = await asyncio.wait(tasks, timeout=deadline) if tasks else ((), set())
        for t in pending:
            t.cancel()
        if pending:
            await asyncio.gather(*pending, return_exceptions=True)
        self._pool.retain([url.rstrip("/") + self.path for _, url in targets])
        return answers

    async def _check(self, url: str) -> tuple[bool, str | None]:
        try:
            async with asyncio.timeout(self.request_timeout_s):
                status = await self._pool.get(url.rstrip("/") + self.path)
        except Exception as exc:  # a malformed url from the registry is a failed check too
            return False, reason_of(exc)
        if status == 200:
            return True, None
        return False, f"status {status}"

    def close(self) -> None:
        """Close the kept connections and stop the checks' event loop."""
        with self._lock:
            self._pool.close()
