"""The reference scheduler's atomic Lua scripts over the registry (keys: gpucon.registry.keys).

The scheduler keeps ``gpucon:assigned:{name}`` (entry id -> unix time it was assigned), so a
drain can wait for a backend's pending entries to reach 0, and the shared ``gpucon:inflight``
hash (name -> count), which consoles read with one command per tick.
Invariant kept by the scripts: ``HGET gpucon:inflight name == HLEN gpucon:assigned:{name}``.
Every key a script touches is passed in KEYS.
"""

from __future__ import annotations

from gpucon.registry import keys

RESULTS_MAXLEN = 100_000
REPLY_TTL_S = 600


def script_keys(name: str) -> list[str]:
    """KEYS of ASSIGN_LUA and RELEASE_LUA for one backend (their ARGV: entry id, name)."""
    return [keys.backend_key(name), keys.assigned_key(name), keys.INFLIGHT]


# KEYS[1] backend hash, KEYS[2] assigned hash, KEYS[3] inflight hash; ARGV[1] entry id,
# ARGV[2] backend name. Assign only if the backend is active with a finite weight > 0 (what
# gpucon.registry.parse calls eligible: nan and inf are not), atomically with the inflight count.
# Returns {1, inflight, assigned_at} or {0, state}.
ASSIGN_LUA = """
local st = redis.call('HGET', KEYS[1], 'state')
local w = tonumber(redis.call('HGET', KEYS[1], 'weight') or '0') or 0
if st ~= 'active' or not (w > 0) or w == math.huge then
  return {0, st or 'missing'}
end
local t = redis.call('TIME')
local ts = t[1] .. '.' .. string.format('%06d', tonumber(t[2]))
local n = redis.call('HINCRBY', KEYS[3], ARGV[2], 1)
redis.call('HSET', KEYS[2], ARGV[1], ts)
return {1, n, ts}
"""

# KEYS[1] backend hash, KEYS[2] assigned hash, KEYS[3] inflight hash; ARGV[1] entry id,
# ARGV[2] backend name. Idempotent: the count drops only if this entry was still assigned there.
RELEASE_LUA = """
if redis.call('HDEL', KEYS[2], ARGV[1]) == 1 then
  if redis.call('EXISTS', KEYS[1]) == 1 then
    return redis.call('HINCRBY', KEYS[3], ARGV[2], -1)
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
