-- Migration, step two: add one parked claim to the subject's and the
-- namespace's v2 counters, at most once.
--
-- KEYS[1]  the subject's v2 settled-spend counter
-- KEYS[2]  the namespace's v2 settled-spend counter
-- KEYS[3]  the namespace's record of applied claims: token -> amount
-- ARGV     token ("<escaped subject>#<sequence>"), amount
--
-- Returns the amount added, or 0 when the token was applied already (a resumed
-- run replaying a claim it finished before dying).
--
-- Both counters are *incremented* by the claim, never rewritten from a sum:
-- live v2 replicas may be settling into the same counters meanwhile, and a
-- recomputed total would erase their charges. A later claim from the same v1
-- key carries a new sequence number, so fresh spend is never taken for a
-- replay. All three keys carry the v2 namespace tag: one cluster slot.

local token = ARGV[1]
local claimed = tonumber(ARGV[2])

-- Recording the token is the test: it succeeds only the first time.
local first_time = redis.call('HSETNX', KEYS[3], token, claimed)
if first_time == 0 then
  return 0
end
if claimed > 0 then
  redis.call('INCRBY', KEYS[1], claimed)
  redis.call('INCRBY', KEYS[2], claimed)
end
return claimed
