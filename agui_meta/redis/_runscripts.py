"""The Lua scripts of the gateway's runs on Redis (one ``EVALSHA`` each; all keys of one shard).

A run in flight has a holder, ``"token key"``: ``token`` from the shard's fence counter,
``key`` the run's key. The thread's active key holds it; every write of the run (its events,
its end) checks it first, so an executor that lost the run (paused, partitioned, taken over by
another replica after its lease ran out) writes nothing. The lease is the run's score in the
shard's in-flight set: the end of the lease in milliseconds of the server's clock.

A dispatched run (a front replica that does not execute) is an entry of the shard's dispatch
stream, added by ``BEGIN`` with the run; an executor of the consumer group :data:`GROUP` reads
it and takes the run with ``TAKE`` (a new fencing token, its own lease); ``COMMIT`` acknowledges
and deletes the entry with the run's end, whoever ends it.
"""

from __future__ import annotations

__all__ = ["BEGIN", "CHARGE", "CLAIM", "COMMIT", "LOG", "PARK", "RENEW", "REQUEUE", "STEAL", "TAKE"]

#: The consumer group of the executors, on every dispatch stream.
GROUP = "executors"

_NOW = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
"""

#: KEYS: active, fence, inflight, run hash, runids, latest, alive[, dispatch stream].
#: ARGV: key, thread, run id, scope, agent, lease ms, alive ms[, the most entries of the
#: dispatch stream, the dispatch entry's fields].
#: Returns {1, holder}, {0, the active holder} when the thread has a run in flight, or
#: {-1, entries} when the dispatch stream holds that many entries already (an entry per
#: dispatched run not ended: waiting for an executor or executing), at least the most: nothing
#: is written. With a dispatch stream, the run is also an entry there (``key``, ``holder``,
#: then the fields), in the same script: reserved and dispatched at once; ``lease ms`` is then
#: how long it may wait for an executor.
BEGIN = (
    _NOW
    + """
local held = redis.call('GET', KEYS[1])
if held then return {0, held} end
if KEYS[8] then
  local queued = redis.call('XLEN', KEYS[8])
  if queued >= tonumber(ARGV[8]) then return {-1, queued} end
end
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
if KEYS[8] then
  local id = redis.call('XADD', KEYS[8], '*', 'key', ARGV[1], 'holder', holder,
                        unpack(ARGV, 9))
  redis.call('HSET', KEYS[4], 'entry', id, 'taken', 0)
end
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

#: KEYS: active, fence, inflight, log, run hash. ARGV: key, lease ms.
#: Takes over a run whose lease ran out: a new holder (the old one is fenced out), a new lease.
#: Returns {holder, index of the log's last entry, taken}, or {} when the run is not to be
#: taken; ``taken`` is ``0`` for a dispatched run no executor took (else ``1``).
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
local taken = 1
if redis.call('HGET', KEYS[5], 'taken') == '0' then taken = 0 end
return {holder, index, taken}
"""
)

#: KEYS: active, inflight, run hash, log, alive, thread hash, runids, control stream, dispatch
#: stream.
#: ARGV: holder, key, keep ms, index of the end marker, expected version, snapshot (or ''),
#: new version, index of the first closing event, the closing events (a takeover's).
#: The run's end, at once: the thread saved (compare-and-set), its last events and the log's
#: end marker, the thread freed. Returns {1, version}, {0, stored version} when the thread moved
#: (it is not saved; the run ends all the same), or an error FENCED (nothing written). A
#: dispatched run's entry is acknowledged and deleted with it: exactly once, whoever ends it.
COMMIT = (
    """
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
local entry = redis.call('HGET', KEYS[3], 'entry')
if entry and KEYS[9] then
  redis.call('XACK', KEYS[9], '"""
    + GROUP
    + """', entry)
  redis.call('XDEL', KEYS[9], entry)
end
redis.call('HSET', KEYS[3], 'ended', 1)
redis.call('PEXPIRE', KEYS[3], ARGV[3])
redis.call('PEXPIRE', KEYS[7], ARGV[3])
return {saved, v}
"""
)

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

#: KEYS: active, fence, inflight, run hash, alive, dispatch stream.
#: ARGV: the dispatcher's holder, key, lease ms, alive ms, executor name, entry id.
#: An executor takes a dispatched run: a new holder (its fencing token) and its own lease.
#: Returns the holder, or ``false`` when the run is not the dispatcher's any more (it ended, or
#: waited too long and was ended): the entry is acknowledged and deleted then.
TAKE = (
    _NOW
    + """
if redis.call('GET', KEYS[1]) ~= ARGV[1] then
  redis.call('XACK', KEYS[6], '"""
    + GROUP
    + """', ARGV[6])
  redis.call('XDEL', KEYS[6], ARGV[6])
  return false
end
local holder = redis.call('INCR', KEYS[2]) .. ' ' .. ARGV[2]
redis.call('SET', KEYS[1], holder)
redis.call('ZADD', KEYS[3], now + tonumber(ARGV[3]), ARGV[2])
redis.call('HSET', KEYS[4], 'taken', 1, 'executor', ARGV[5])
redis.call('SET', KEYS[5], '1', 'PX', ARGV[4])
return holder
"""
)

#: KEYS: dispatch stream, run hash (or the stream again). ARGV: entry id, its fields.
#: An entry an executor read but has no room for, handed back: acknowledged, deleted and added
#: again at the stream's end (another executor reads it), the run hash told its new id.
#: Returns the new id.
REQUEUE = (
    """
redis.call('XACK', KEYS[1], '"""
    + GROUP
    + """', ARGV[1])
redis.call('XDEL', KEYS[1], ARGV[1])
local id = redis.call('XADD', KEYS[1], '*', unpack(ARGV, 2))
if KEYS[2] ~= KEYS[1] and redis.call('HGET', KEYS[2], 'entry') == ARGV[1] then
  redis.call('HSET', KEYS[2], 'entry', id)
end
return id
"""
)

#: KEYS: dispatch stream, parked stream. ARGV: entry id, why, its fields.
#: A malformed entry: kept in the parked stream (its id, why, its fields), acknowledged and
#: deleted, so that no executor reads it again.
PARK = (
    """
redis.call('XADD', KEYS[2], 'MAXLEN', '~', 1000, '*', 'entry', ARGV[1], 'error', ARGV[2],
           unpack(ARGV, 3))
redis.call('XACK', KEYS[1], '"""
    + GROUP
    + """', ARGV[1])
redis.call('XDEL', KEYS[1], ARGV[1])
return 1
"""
)
