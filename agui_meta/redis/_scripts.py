"""The Lua scripts that make each step atomic on the Redis server (one ``EVALSHA`` each).

Every script that changes a shard's state first checks the shard's lease against the caller's
fencing token, so a worker that lost its lease (paused, partitioned, slow) changes nothing.
Checks come before writes, so a refused call writes nothing.
"""

from __future__ import annotations

__all__ = ["ACQUIRE", "COMMIT", "INGEST", "READ", "RELEASE", "RENEW", "SAVE_THREAD"]

#: KEYS: the sources hash, then the digests strings and shard streams the envelopes name.
#: ARGV: group, then six per envelope, in order: its digests key's index in KEYS, its shard
#: stream's index in KEYS, source, seq, digest (16 bytes), the envelope.
#: Every envelope is checked before anything is written: one at a sequence number its source
#: already took must carry the digest taken there (a retry, skipped), the next one is appended
#: (its digest stored at ``16 * (seq - 1)`` in the source's digests string), any other is
#: refused. Returns {appended, retries}, or an error (nothing written): ``SEQGAP last seq
#: source`` or ``DIVERGED seq taken source`` (``taken``: 0 when no digest was kept there).
INGEST = """
local n = (#ARGV - 1) / 6
local last, taken, append = {}, {}, {}
for i = 0, n - 1 do
  local b = 2 + 6 * i
  local digests, source, seq, digest = KEYS[tonumber(ARGV[b])], ARGV[b + 2], tonumber(ARGV[b + 3]), ARGV[b + 4]
  if last[source] == nil then
    last[source] = tonumber(redis.call('HGET', KEYS[1], source) or '0')
    taken[source] = {}
  end
  local l = last[source]
  if seq <= l then
    local had = taken[source][seq]
    if had == nil then
      had = redis.call('GETRANGE', digests, 16 * (seq - 1), 16 * seq - 1)
    end
    if had ~= digest then
      local kept = 1
      if #had ~= 16 then kept = 0 end
      return redis.error_reply('DIVERGED ' .. seq .. ' ' .. kept .. ' ' .. source)
    end
  elseif seq == l + 1 then
    last[source] = seq
    taken[source][seq] = digest
    append[#append + 1] = b
  else
    return redis.error_reply('SEQGAP ' .. l .. ' ' .. seq .. ' ' .. source)
  end
end
for _, b in ipairs(append) do
  local digests, stream = KEYS[tonumber(ARGV[b])], KEYS[tonumber(ARGV[b + 1])]
  if redis.call('EXISTS', stream) == 0 then
    redis.call('XGROUP', 'CREATE', stream, ARGV[1], '0', 'MKSTREAM')
  end
  redis.call('XADD', stream, '*', 'e', ARGV[b + 5])
  redis.call('SETRANGE', digests, 16 * (tonumber(ARGV[b + 3]) - 1), ARGV[b + 4])
  redis.call('HSET', KEYS[1], ARGV[b + 2], ARGV[b + 3])
end
return {#append, n - #append}
"""

#: KEYS: lease, fence counter, shard stream. ARGV: worker name, lease ms, group.
#: Returns the new fencing token, or 0 when the lease is held.
ACQUIRE = """
if redis.call('EXISTS', KEYS[1]) == 1 then return 0 end
local token = redis.call('INCR', KEYS[2])
redis.call('SET', KEYS[1], token .. ' ' .. ARGV[1], 'PX', ARGV[2])
if redis.call('EXISTS', KEYS[3]) == 0 then
  redis.call('XGROUP', 'CREATE', KEYS[3], ARGV[3], '0', 'MKSTREAM')
else
  local ok = pcall(redis.call, 'XGROUP', 'CREATE', KEYS[3], ARGV[3], '0')
end
return token
"""

#: KEYS: lease. ARGV: holder ("token worker"), lease ms. Returns 1, or 0 when lost.
RENEW = """
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
redis.call('PEXPIRE', KEYS[1], ARGV[2])
return 1
"""

#: KEYS: lease. ARGV: holder.
RELEASE = """
if redis.call('GET', KEYS[1]) == ARGV[1] then redis.call('DEL', KEYS[1]) return 1 end
return 0
"""

#: KEYS: lease1, stream1, lease2, stream2, … ARGV: group, consumer, count, holder1, holder2, …
#: Returns, per shard, the new entries (as XREADGROUP gives them) or -1 when its lease is lost.
READ = """
local out = {}
for i = 1, #KEYS / 2 do
  if redis.call('GET', KEYS[2 * i - 1]) ~= ARGV[3 + i] then
    out[i] = -1
  else
    local got = redis.call('XREADGROUP', 'GROUP', ARGV[1], ARGV[2], 'COUNT', ARGV[3],
                           'STREAMS', KEYS[2 * i], '>')
    if got then out[i] = got[1][2] else out[i] = {} end
  end
end
return out
"""

#: KEYS: lease, shard stream, outputs stream, usage hash, quarantine hash, parked stream.
#: ARGV: holder, group, thread key prefix, msgpack payload
#:   {threads = {{id, expected version, snapshot or '', new version, watermark or ''}…},
#:    outputs = {{key, thread, kind, data}…}, usage = {{field, increment}…}, acks = {ids…},
#:    quarantine = {{thread, reason}…}, park = {ids…}}.
#: A parked entry is copied to the parked stream (with ``stream`` and ``id``) before its ack.
#: Returns 1, or an error, before anything is written: FENCED (the lease is not the caller's),
#: VERSION (a snapshot moved), WRONGTYPE (a thread key that is not a hash), CORRUPT (a
#: namespace key of the wrong type, a usage counter that is not an integer).
COMMIT = """
if redis.call('GET', KEYS[1]) ~= ARGV[1] then
  return redis.error_reply('FENCED the lease of ' .. KEYS[1] .. ' is not held by ' .. ARGV[1])
end
local kinds = {[3] = 'stream', [4] = 'hash', [5] = 'hash', [6] = 'stream'}
for i, kind in pairs(kinds) do
  local t = redis.call('TYPE', KEYS[i]).ok
  if t ~= kind and t ~= 'none' then
    return redis.error_reply('CORRUPT ' .. KEYS[i] .. ' is a ' .. t .. ', not a ' .. kind)
  end
end
local p = cmsgpack.unpack(ARGV[4])
for _, t in ipairs(p.threads) do
  local key = ARGV[3] .. t[1]
  local kind = redis.call('TYPE', key).ok
  if kind ~= 'hash' and kind ~= 'none' then
    return redis.error_reply('WRONGTYPE thread ' .. t[1] .. ': ' .. key .. ' is a ' .. kind)
  end
  if t[3] ~= '' then
    local v = redis.call('HGET', key, 'v') or '0'
    if v ~= tostring(t[2]) then
      return redis.error_reply('VERSION thread ' .. t[1] .. ' is at ' .. v .. ', not ' .. t[2])
    end
  end
end
for _, u in ipairs(p.usage) do
  local now = redis.call('HGET', KEYS[4], u[1])
  if now and not string.match(now, '^%-?%d+$') then
    return redis.error_reply('CORRUPT ' .. KEYS[4] .. ' field ' .. u[1] .. ' is not an integer')
  end
end
for _, q in ipairs(p.quarantine) do redis.call('HSET', KEYS[5], q[1], q[2]) end
for _, id in ipairs(p.park) do
  local got = redis.call('XRANGE', KEYS[2], id, id)
  if got[1] then
    redis.call('XADD', KEYS[6], '*', 'stream', KEYS[2], 'id', id, unpack(got[1][2]))
  end
end
for _, t in ipairs(p.threads) do
  local key = ARGV[3] .. t[1]
  if t[3] ~= '' then redis.call('HSET', key, 'v', t[4], 'snap', t[3]) end
  if t[5] ~= '' then redis.call('HSET', key, 'wm', t[5]) end
end
for _, o in ipairs(p.outputs) do
  redis.call('XADD', KEYS[3], '*', 'key', o[1], 'thread', o[2], 'kind', o[3], 'data', o[4])
end
for _, u in ipairs(p.usage) do redis.call('HINCRBY', KEYS[4], u[1], u[2]) end
if #p.acks > 0 then
  for i = 1, #p.acks, 1000 do
    redis.call('XACK', KEYS[2], ARGV[2], unpack(p.acks, i, math.min(i + 999, #p.acks)))
  end
  -- Trim what every reader is done with: below the first pending entry, or (none pending)
  -- below the last delivered one. Entries still pending are never dropped.
  local pending = redis.call('XPENDING', KEYS[2], ARGV[2])
  local floor = pending[2]
  if not floor then
    for _, g in ipairs(redis.call('XINFO', 'GROUPS', KEYS[2])) do
      for j = 1, #g, 2 do
        if g[j] == 'last-delivered-id' then floor = g[j + 1] end
      end
    end
  end
  if floor then redis.call('XTRIM', KEYS[2], 'MINID', floor) end
end
return 1
"""

#: KEYS: thread hash. ARGV: expected version, snapshot, new version.
#: Returns 1, or {actual version} when the compare-and-set fails.
SAVE_THREAD = """
local v = tonumber(redis.call('HGET', KEYS[1], 'v') or '0')
if v ~= tonumber(ARGV[1]) then return {v} end
redis.call('HSET', KEYS[1], 'v', ARGV[3], 'snap', ARGV[2])
return 1
"""
