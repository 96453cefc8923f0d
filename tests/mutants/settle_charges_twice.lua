-- Mutant of settle_v1.lua: drops the hold and charges the actual spend twice
-- (a second INCRBY, as a refactoring that charged in two places would). The
-- record runs ahead of the truth: positive drift, and requests denied while
-- the truth had room.
--
-- KEYS[1]  settled spend of the subject
-- KEYS[2]  live holds of the subject
-- ARGV     reservation_id, actual_microdollars

redis.call('HDEL', KEYS[2], ARGV[1])
local actual = tonumber(ARGV[2])
if actual > 0 then
  redis.call('INCRBY', KEYS[1], actual)
  redis.call('INCRBY', KEYS[1], actual)
end
return 1
