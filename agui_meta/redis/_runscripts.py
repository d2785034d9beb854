"""The Lua scripts of the gateway's runs on Redis (one ``EVALSHA`` each; all keys of one shard).

A run in flight has a holder, ``"token key"``: ``token`` from the shard's fence counter,
``key`` the run's key. The thread's active key holds it; every write of the run (its events,
its end) checks it first, so an executor that lost the run (paused, partitioned, taken over by
another replica after its lease ran out) writes nothing. The lease is the run's score in the
shard's in-flight set: the end of the lease in milliseconds of the server's clock.
"""

from __future__ import annotations

__all__ = ["BEGIN", "CHARGE", "CLAIM", "COMMIT", "LOG", "RENEW", "STEAL"]

_NOW = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
"""

#: KEYS: active, fence, inflight, run hash, runids, latest, alive.
#: ARGV: key, thread, run id, scope, agent, lease ms, alive ms.
#: Returns {1, holder}, or {0, the active holder} when the thread has a run in flight.
BEGIN = (
    _NOW
    + """
local held = redis.call('GET', KEYS[1])
if held then return {0, held} end
local holder = redis.call('INCR', KEYS[2]) .. ' ' .. ARGV[1]
redis.call('SET', KEYS[1], holder)
redis.call('ZADD', KEYS[3], now + tonumber(ARGV[6]), ARGV[1])
local n = redis.call('HINCRBY', KEYS[6], 'n:' .. ARGV[2], 1)
redis.call('HSET', KEYS[6], ARGV[2], ARGV[1])
redis.call('HSET', KEYS[4], 'thread', ARGV[2], 'run', ARGV[3], 'scope', ARGV[4],
           'agent', ARGV[5], 'n', n, 'ended', 0)
redis.call('PERSIST', KEYS[4])
redis.call('HSET', KEYS[5], ARGV[3], ARGV[1])
redis.call('PERSIST', KEYS[5])
redis.call('SET', KEYS[7], '1', 'PX', ARGV[7])
return {1, holder}
"""
)

#: KEYS: active, inflight, alive. ARGV: holder, key, lease ms, alive ms.
#: Returns 1, or 0 when the holder lost the run.
RENEW = (
    _NOW
    + """
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
redis.call('ZADD', KEYS[2], 'XX', now + tonumber(ARGV[3]), ARGV[2])
redis.call('SET', KEYS[3], '1', 'PX', ARGV[4])
return 1
"""
)

#: KEYS: active, log, alive. ARGV: holder, maxlen, log ttl ms, alive ms, index of the first
#: event (``N + 1``), the events. Returns 1, or 0 when the holder lost the run.
LOG = """
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
local first = tonumber(ARGV[5])
for i = 6, #ARGV do
  redis.call('XADD', KEYS[2], 'MAXLEN', '~', ARGV[2], '0-' .. (first + i - 6), 'd', ARGV[i])
end
redis.call('PEXPIRE', KEYS[2], ARGV[3])
redis.call('SET', KEYS[3], '1', 'PX', ARGV[4])
return 1
"""

#: KEYS: active, fence, inflight, log. ARGV: key, lease ms.
#: Takes over a run whose lease ran out: a new holder (the old one is fenced out), a new lease.
#: Returns {holder, index of the log's last entry}, or {} when the run is not to be taken.
STEAL = (
    _NOW
    + """
local score = redis.call('ZSCORE', KEYS[3], ARGV[1])
if not score or tonumber(score) > now then return {} end
local held = redis.call('GET', KEYS[1])
if held and string.sub(held, -#ARGV[1] - 1) ~= ' ' .. ARGV[1] then
  redis.call('ZREM', KEYS[3], ARGV[1])
  return {}
end
local holder = redis.call('INCR', KEYS[2]) .. ' ' .. ARGV[1]
redis.call('SET', KEYS[1], holder)
redis.call('ZADD', KEYS[3], now + tonumber(ARGV[2]), ARGV[1])
local last = redis.call('XREVRANGE', KEYS[4], '+', '-', 'COUNT', 1)
local index = 0
if last[1] then index = tonumber(string.match(last[1][1], '-(%d+)$')) end
return {holder, index}
"""
)

#: KEYS: active, inflight, run hash, log, alive, thread hash, runids, control stream.
#: ARGV: holder, key, keep ms, index of the end marker, expected version, snapshot (or ''),
#: new version, index of the first closing event, the closing events (a takeover's).
#: The run's end, at once: the thread saved (compare-and-set), its last events and the log's
#: end marker, the thread freed. Returns {1, version}, {0, stored version} when the thread moved
#: (it is not saved; the run ends all the same), or an error FENCED (nothing written).
COMMIT = """
if redis.call('GET', KEYS[1]) ~= ARGV[1] then
  return redis.error_reply('FENCED the run ' .. ARGV[2] .. ' is not held by ' .. ARGV[1])
end
local saved, v = 1, tonumber(redis.call('HGET', KEYS[6], 'v') or '0')
if ARGV[6] ~= '' then
  if v == tonumber(ARGV[5]) then
    redis.call('HSET', KEYS[6], 'v', ARGV[7], 'snap', ARGV[6])
    v = tonumber(ARGV[7])
  else
    saved = 0
  end
end
for i = 9, #ARGV do
  redis.call('XADD', KEYS[4], '0-' .. (tonumber(ARGV[8]) + i - 9), 'd', ARGV[i])
end
redis.call('XADD', KEYS[4], '0-' .. ARGV[4], 'end', 'complete')
redis.call('PEXPIRE', KEYS[4], ARGV[3])
redis.call('DEL', KEYS[1], KEYS[5], KEYS[8])
redis.call('ZREM', KEYS[2], ARGV[2])
redis.call('HSET', KEYS[3], 'ended', 1)
redis.call('PEXPIRE', KEYS[3], ARGV[3])
redis.call('PEXPIRE', KEYS[7], ARGV[3])
return {saved, v}
"""

#: KEYS: owners, scope set. ARGV: thread, scope.
#: Returns the owning scope (``ARGV[2]`` when the thread had none).
CLAIM = (
    _NOW
    + """
local owner = redis.call('HGET', KEYS[1], ARGV[1])
if owner then return owner end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
redis.call('ZADD', KEYS[2], now, ARGV[1])
return ARGV[2]
"""
)

#: KEYS: the scope's budget totals of the period. ARGV: run key, tokens, cost, ttl ms.
#: Adds the run's usage once (the run key is the idempotency key: a second charge of the same
#: run adds nothing). Returns {1 if added else 0, tokens, cost} (the totals after it).
CHARGE = """
if redis.call('HSETNX', KEYS[1], 'r:' .. ARGV[1], 1) == 0 then
  local t = redis.call('HMGET', KEYS[1], 'tokens', 'cost')
  return {0, t[1] or '0', t[2] or '0'}
end
local tokens = redis.call('HINCRBY', KEYS[1], 'tokens', ARGV[2])
local cost = redis.call('HINCRBYFLOAT', KEYS[1], 'cost', ARGV[3])
redis.call('PEXPIRE', KEYS[1], ARGV[4])
return {1, tokens, cost}
"""
