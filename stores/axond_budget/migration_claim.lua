-- Migration, step one for one v1 subject: take its whole settled-spend counter
-- into a parked claim, numbered, in one atomic step.
--
-- KEYS[1]  the subject's v1 settled-spend counter
-- KEYS[2]  the parked claim: "sequence:amount", until step two has added it to v2
-- KEYS[3]  the subject's claim counter, so every claim gets a fresh number
--
-- Returns the parked claim ("sequence:amount") or false when there is nothing
-- to claim. A claim an earlier, interrupted run parked is handed back as is
-- instead of taking a new one: it has to be finished first.
--
-- Once claimed, the spend is off the v1 counter (so it cannot be claimed twice)
-- but not yet added anywhere (so dying here loses nothing: the parked claim is
-- still there for the next run). All three keys carry the v1 tag of the
-- subject, so they share one cluster slot.

local parked = redis.call('GET', KEYS[2])
if parked then
  return parked
end
local balance = redis.call('GET', KEYS[1])
if not balance then
  return false
end
local sequence = redis.call('INCR', KEYS[3])
local fresh = sequence .. ':' .. balance
redis.call('DEL', KEYS[1])
redis.call('SET', KEYS[2], fresh)
return fresh
