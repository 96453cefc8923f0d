-- Our settle: drop the hold and charge the actual amount, but only when the
-- hold was still there, so a settle the driver re-sent after a timeout is not
-- charged twice. (Is that safe? A hold that expired before its settle arrived
-- is never charged either: run it and read conservation_drift.)
--
-- KEYS[1]  settled spend of the subject
-- KEYS[2]  live holds of the subject
-- ARGV     reservation_id, actual_microdollars

local removed = redis.call('HDEL', KEYS[2], ARGV[1])
local actual = tonumber(ARGV[2])
if removed == 1 and actual > 0 then
  redis.call('INCRBY', KEYS[1], actual)
end
return 1
