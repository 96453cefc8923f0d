-- lab:include live_holds.lua
-- Mutant of reserve_v1.lua: a reserve that runs again under the same
-- reservation id (a driver's re-send after a timeout) writes a second hold
-- beside the first instead of rewriting it. The caller's settlement drops
-- only the hold under its id; the second one counts until its deadline.
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

-- The bug: a second execution takes its own id to be someone else's.
local id = reservation_id
if redis.call('HEXISTS', KEYS[2], id) == 1 then
  id = id .. '~again'
end
redis.call('HSET', KEYS[2], id, estimate .. ':' .. (now_ms + ttl_ms))
redis.call('PEXPIRE', KEYS[2], ttl_ms * 2)
return 1
