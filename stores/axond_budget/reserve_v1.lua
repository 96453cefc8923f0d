-- lab:include live_holds.lua
-- Admit one request against a subject's spend cap, and hold its estimate.
--
-- KEYS[1]  settled spend of the subject (an integer counter)
-- KEYS[2]  live holds of the subject: hash of reservation id -> "amount:deadline_ms"
-- ARGV     now_ms, reservation_ttl_ms, cap, estimate, reservation_id
--
-- Returns 1 (admitted; the hold is written) or 0 (no room under the cap).
--
-- Holds past their deadline are dropped before deciding (`live_holds`, in the
-- fragment the first line includes), so a replica that died while holding an
-- estimate cannot wedge the budget for longer than the reservation TTL. The
-- caller passes its own clock as now_ms: the script never asks the server for
-- the time, which keeps it replayable.

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

redis.call('HSET', KEYS[2], reservation_id, estimate .. ':' .. (now_ms + ttl_ms))
-- The hash as a whole outlives its newest hold, so an idle subject's holds
-- vanish even if no later reserve comes to reclaim them.
redis.call('PEXPIRE', KEYS[2], ttl_ms * 2)
return 1
