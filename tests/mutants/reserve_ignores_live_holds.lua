-- lab:include live_holds.lua
-- Mutant of reserve_v1.lua: reclaims expired holds as the fixed script does,
-- but decides on the settled spend alone, as if no request were in flight
-- (`live` is left out of the comparison). Concurrent requests are admitted
-- into the same room: wrongful admissions, and true spend above the cap.
--
-- KEYS[1]  settled spend of the subject
-- KEYS[2]  live holds of the subject
-- ARGV     now_ms, reservation_ttl_ms, cap, estimate, reservation_id

local now_ms = tonumber(ARGV[1])
local ttl_ms = tonumber(ARGV[2])
local cap = tonumber(ARGV[3])
local estimate = tonumber(ARGV[4])
local reservation_id = ARGV[5]

live_holds(KEYS[2], now_ms)

local settled = tonumber(redis.call('GET', KEYS[1]) or '0')
if settled + estimate > cap then
  return 0
end

redis.call('HSET', KEYS[2], reservation_id, estimate .. ':' .. (now_ms + ttl_ms))
redis.call('PEXPIRE', KEYS[2], ttl_ms * 2)
return 1
