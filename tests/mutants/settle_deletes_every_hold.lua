-- Mutant of settle_v1.lua: drops the subject's whole holds hash (DEL) instead
-- of the settling request's hold (HDEL), then charges. Every other request
-- of the subject still running loses its hold long before its deadline; the
-- reserves that follow admit into the room those requests still use.
--
-- KEYS[1]  settled spend of the subject
-- KEYS[2]  live holds of the subject (all of them deleted: the bug)
-- ARGV     reservation_id, actual_microdollars

redis.call('DEL', KEYS[2])
local actual = tonumber(ARGV[2])
if actual > 0 then
  redis.call('INCRBY', KEYS[1], actual)
end
return 1
