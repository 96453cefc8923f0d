-- Settle one reservation in both scopes: drop its hold from the subject's and
-- the namespace's hashes and charge the actual amount to both counters, in one
-- script, so neither scope is ever charged or released without the other.
--
-- KEYS[1]  settled spend of the subject     KEYS[2]  live holds of the subject
-- KEYS[3]  settled spend of the namespace   KEYS[4]  live holds of the namespace
-- ARGV     reservation_id, actual_microdollars
--
-- As in v1, settling an id that is no longer held (it expired, or this is a
-- replay) still charges: the spend happened whether or not the hold survived.

local reservation_id = ARGV[1]
local charged = tonumber(ARGV[2])

redis.call('HDEL', KEYS[2], reservation_id)
redis.call('HDEL', KEYS[4], reservation_id)
if charged > 0 then
  redis.call('INCRBY', KEYS[1], charged)
  redis.call('INCRBY', KEYS[3], charged)
end
return 1
