-- Turn a hold into measured spend: drop the hold and charge the actual amount,
-- in one script, so a settlement can never release without charging or charge
-- without releasing.
--
-- KEYS[1]  settled spend of the subject
-- KEYS[2]  live holds of the subject
-- ARGV     reservation_id, actual_microdollars
--
-- Settling an id that is no longer held (it expired, or this is a replay)
-- still charges: the spend happened whether or not the hold survived.

redis.call('HDEL', KEYS[2], ARGV[1])
local actual = tonumber(ARGV[2])
if actual > 0 then
  redis.call('INCRBY', KEYS[1], actual)
end
return 1
