-- Take one concurrency lease for a (namespace, subject), if fewer than
-- max_in_flight are live.
--
-- KEYS[1]  the subject's leases: hash of lease id -> deadline_ms
-- ARGV     now_ms, lease_ttl_ms, max_in_flight, lease_id
--
-- Returns {1, lease_id} (admitted; the lease is written) or {0, lease_id}
-- (max_in_flight leases are live). The id is echoed so that a caller on a
-- shared, multiplexed connection can tell its own reply from another's.
--
-- Leases past their deadline are dropped before counting, so a replica that
-- died holding one blocks a slot for at most the lease TTL, with no sweeper.
-- now_ms is the caller's clock: the script never asks the server for the time.

local now_ms = tonumber(ARGV[1])
local lease_ttl_ms = tonumber(ARGV[2])
local max_in_flight = tonumber(ARGV[3])
local lease_id = ARGV[4]

local live = 0
local entries = redis.call('HGETALL', KEYS[1])
for index = 1, #entries, 2 do
  local deadline_ms = tonumber(entries[index + 1])
  if deadline_ms <= now_ms then
    redis.call('HDEL', KEYS[1], entries[index])
  else
    live = live + 1
  end
end

if live >= max_in_flight then
  return {0, lease_id}
end

redis.call('HSET', KEYS[1], lease_id, now_ms + lease_ttl_ms)
-- The hash outlives its newest lease, so an idle subject's leases vanish
-- even when no later acquire comes to reclaim them.
redis.call('PEXPIRE', KEYS[1], lease_ttl_ms * 2)
return {1, lease_id}
