-- Mutant of settle_v2.lua: drops the hold in both scopes and charges the
-- subject's counter, but never the namespace's (its INCRBY is gone). The
-- namespace record loses every settlement: negative drift in the namespace
-- scope, and a namespace cap that lets through spend it never counted.
--
-- KEYS[1]  settled spend of the subject     KEYS[2]  live holds of the subject
-- KEYS[3]  settled spend of the namespace   KEYS[4]  live holds of the namespace
-- ARGV     reservation_id, actual_microdollars

local reservation_id = ARGV[1]
local charged = tonumber(ARGV[2])

redis.call('HDEL', KEYS[2], reservation_id)
redis.call('HDEL', KEYS[4], reservation_id)
if charged > 0 then
  redis.call('INCRBY', KEYS[1], charged)
end
return 1
