"""The scheduler's side of the Redis registry contract: key names and its atomic Lua scripts.

DESIGN.md's contract: ``gpucon:backend:{name}`` hashes, the ``gpucon:backends`` set and the
``gpucon:registry:version`` counter. The scheduler adds ``gpucon:assigned:{name}`` (entry id ->
unix time it was assigned), so a drain can wait for a backend's pending entries to reach 0.
Invariant kept by the scripts: ``inflight == HLEN gpucon:assigned:{name}``.
"""

from __future__ import annotations

# one definition of the key names, shared with the registry control (the write side)
from gpucon.controls.registry import BACKENDS_KEY as BACKENDS_SET
from gpucon.controls.registry import VERSION_KEY as REGISTRY_VERSION
from gpucon.controls.registry import assigned_key, backend_key

__all__ = [
    "ACK_AND_REPLY_LUA",
    "ASSIGN_LUA",
    "BACKENDS_SET",
    "REGISTRY_VERSION",
    "RELEASE_LUA",
    "REPLY_TTL_S",
    "RESULTS_MAXLEN",
    "RESULTS_STREAM",
    "assigned_key",
    "backend_key",
    "reply_key",
]

RESULTS_STREAM = "gen:results"
RESULTS_MAXLEN = 100_000
REPLY_TTL_S = 600


def reply_key(entry_id: str) -> str:
    return f"gen:reply:{entry_id}"


# KEYS[1] backend hash, KEYS[2] assigned hash; ARGV[1] entry id.
# Assign only if the backend is active with weight > 0, atomically with the inflight count.
# Returns {1, inflight, assigned_at} or {0, state}.
ASSIGN_LUA = """
local st = redis.call('HGET', KEYS[1], 'state')
local w = tonumber(redis.call('HGET', KEYS[1], 'weight') or '0') or 0
if st ~= 'active' or w <= 0 then
  return {0, st or 'missing'}
end
local t = redis.call('TIME')
local ts = t[1] .. '.' .. string.format('%06d', tonumber(t[2]))
local n = redis.call('HINCRBY', KEYS[1], 'inflight', 1)
redis.call('HSET', KEYS[2], ARGV[1], ts)
return {1, n, ts}
"""

# KEYS[1] backend hash, KEYS[2] assigned hash; ARGV[1] entry id.
# Idempotent: the inflight count drops only if this entry was still assigned there.
RELEASE_LUA = """
if redis.call('HDEL', KEYS[2], ARGV[1]) == 1 then
  if redis.call('EXISTS', KEYS[1]) == 1 then
    return redis.call('HINCRBY', KEYS[1], 'inflight', -1)
  end
  return 0
end
return -1
"""

# KEYS[1] stream, KEYS[2] reply list, KEYS[3] results stream;
# ARGV[1] group, ARGV[2] entry id, ARGV[3] reply json, ARGV[4] backend, ARGV[5] status,
# ARGV[6] reply ttl, ARGV[7] results maxlen.
# Answers an entry only if this XACK acknowledged it: exactly one answer per entry, even if
# two consumers ended up serving it (a claim raced a slow consumer).
ACK_AND_REPLY_LUA = """
if redis.call('XACK', KEYS[1], ARGV[1], ARGV[2]) == 1 then
  redis.call('LPUSH', KEYS[2], ARGV[3])
  redis.call('EXPIRE', KEYS[2], tonumber(ARGV[6]))
  redis.call('XADD', KEYS[3], 'MAXLEN', '~', ARGV[7], '*',
             'entry_id', ARGV[2], 'backend', ARGV[4], 'status', ARGV[5])
  return 1
end
return 0
"""
