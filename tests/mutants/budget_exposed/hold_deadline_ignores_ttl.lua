-- lab:include live_holds.lua
-- Mutant of reserve_v1.lua: each hold is written with ten times the
-- reservation TTL (a unit slip on the recovery path). A request that settles
-- drops its hold at once, so on a quiet network nothing shows; a hold whose
-- replica died counts ten TTLs before the reclaim drops it.
--
-- KEYS[1]  settled spend of the subject
-- KEYS[2]  live holds of the subject
-- ARGV     now_ms, reservation_ttl_ms, cap, estimate, reservation_id

local now_ms = tonumber(ARGV[1])
local ttl_ms = tonumber(ARGV[2])
local cap = tonumber(ARGV[3])
local estimate = tonumber(ARGV[4])
local reservation_id = ARGV[5]

local live = live_holds(KEYS[2], now_ms)

local settled = tonumber(redis.call('GET', KEYS[1]) or '0')
if settled + live + estimate > cap then
  return 0
end

-- The bug: the deadline (and the hash's expiry) ten TTLs out.
redis.call('HSET', KEYS[2], reservation_id, estimate .. ':' .. (now_ms + ttl_ms * 10))
redis.call('PEXPIRE', KEYS[2], ttl_ms * 20)
return 1
