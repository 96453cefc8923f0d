-- Mutant of settle_v1.lua: charges the actual spend but never drops the hold
-- (the HDEL is gone). The estimate keeps counting against the cap after the
-- request is over, until the hold's deadline: leaked holds, and requests
-- denied while the truth had room.
--
-- KEYS[1]  settled spend of the subject
-- KEYS[2]  live holds of the subject (left as they were: the bug)
-- ARGV     reservation_id, actual_microdollars

local actual = tonumber(ARGV[2])
if actual > 0 then
  redis.call('INCRBY', KEYS[1], actual)
end
return 1
