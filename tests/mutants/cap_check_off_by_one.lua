-- lab:include live_holds.lua
-- Mutant of reserve_v1.lua: the cap check is off by one request. It asks
-- whether there was room *before* this request (settled + live > cap) instead
-- of whether there is room for it (settled + live + estimate > cap), so it
-- still admits when settled + live + estimate == cap + estimate: each subject
-- can be admitted one estimate past its cap.
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
if settled + live > cap then
  return 0
end

redis.call('HSET', KEYS[2], reservation_id, estimate .. ':' .. (now_ms + ttl_ms))
redis.call('PEXPIRE', KEYS[2], ttl_ms * 2)
return 1
