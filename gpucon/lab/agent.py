"""A lab backend's registration agent: it puts its backends back when the registry lost them.

Real backends run a registration agent that re-registers them periodically or when it
reconnects; without one, a Redis restarted empty (the lab's is never persisted) leaves the
scheduler with no backend while every server still runs. Each ``gpucon backend`` the lab
starts runs this agent: every ``heartbeat_s`` it writes, in one atomic script, each of its
backends whose registry entry is gone. An entry that is there is never touched: a drain,
a weight an operator set, the scheduler's counts all stay. Redis unreachable is said once
per outage, each re-registration once.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Sequence

import redis.asyncio as aioredis
from redis.exceptions import RedisError

from gpucon.lab.registration import BackendRecord, record_fields
from gpucon.registry import keys

log = logging.getLogger("gpucon.lab.agent")

HEARTBEAT_S = 2.0
# a heartbeat's Redis round trip waits at most this long (it must not outlast a period)
TIMEOUT_S = 1.0

# KEYS[1] backend hash, KEYS[2] inflight hash, KEYS[3] backends set, KEYS[4] version;
# ARGV[1] name, ARGV[2..] the hash's field/value pairs. Writes the hash only when it is gone
# (an operator's state and weight are kept), lists the name, bumps the version when it wrote
# anything. Returns 1 when it wrote, 0 when the entry was whole.
REGISTER_IF_ABSENT_LUA = """
local have = redis.call('EXISTS', KEYS[1]) == 1
local listed = redis.call('SISMEMBER', KEYS[3], ARGV[1]) == 1
if have and listed then
  return 0
end
if not have then
  redis.call('HSET', KEYS[1], unpack(ARGV, 2))
  redis.call('HSETNX', KEYS[2], ARGV[1], 0)
end
redis.call('SADD', KEYS[3], ARGV[1])
redis.call('INCR', KEYS[4])
return 1
"""


async def register_if_absent(client: aioredis.Redis, record: BackendRecord) -> bool:
    """Write ``record`` unless its registry entry is there; True when it wrote."""
    pairs = [str(x) for item in record_fields(record).items() for x in item]
    wrote = await client.eval(  # type: ignore[misc]
        REGISTER_IF_ABSENT_LUA,
        4,
        keys.backend_key(record.name),
        keys.INFLIGHT,
        keys.BACKENDS,
        keys.VERSION,
        record.name,
        *pairs,
    )
    return bool(wrote)


class RegistrationAgent:
    """Keeps ``records`` registered in the Redis at ``redis_url`` while it runs."""

    def __init__(
        self, redis_url: str, records: Sequence[BackendRecord], heartbeat_s: float = HEARTBEAT_S
    ) -> None:
        if not heartbeat_s > 0:
            raise ValueError(f"heartbeat: expected seconds > 0, got {heartbeat_s}")
        self.records = tuple(records)
        self.heartbeat_s = heartbeat_s
        self.client = aioredis.Redis.from_url(
            redis_url,
            socket_timeout=min(TIMEOUT_S, heartbeat_s),
            socket_connect_timeout=min(TIMEOUT_S, heartbeat_s),
        )
        self.registered = 0  # registrations written (each backend each time)
        self._unreachable = False
        self._beats = 0  # heartbeats that reached Redis

    async def beat(self) -> int:
        """One heartbeat: the backends it registered (0: all were there)."""
        wrote: list[str] = []
        try:
            for record in self.records:
                if await register_if_absent(self.client, record):
                    wrote.append(record.name)
        except (RedisError, OSError) as exc:
            if not self._unreachable:
                log.warning("registry unreachable, retrying every %gs: %s", self.heartbeat_s, exc)
                self._unreachable = True
            return 0
        if self._unreachable:
            log.warning("registry reachable again")
            self._unreachable = False
        for name in wrote:
            if self._beats:
                log.warning("registered %s again: its registry entry was gone", name)
            else:  # at start, beside (or before) the lab's own registration
                log.info("registered %s", name)
        self._beats += 1
        self.registered += len(wrote)
        return len(wrote)

    async def run(self, stop: asyncio.Event) -> None:
        """Beat every ``heartbeat_s`` until ``stop`` is set; then close the client."""
        try:
            while not stop.is_set():
                await self.beat()
                with contextlib.suppress(TimeoutError):  # a period passed: beat again
                    await asyncio.wait_for(stop.wait(), self.heartbeat_s)
        finally:
            await self.client.aclose()
