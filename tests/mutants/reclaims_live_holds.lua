-- Mutant of the live_holds.lua fragment: the reclaim compares each deadline
-- with now + the reservation TTL instead of now, so every hold -- whose
-- deadline is at most now + TTL -- is dropped as expired at the next reserve
-- on its subject, its request still running. The reserve that follows sees
-- only settled spend and admits into room the running requests hold.
--
-- holds_key  a hash of reservation id -> "amount:deadline_ms"
-- now_ms     the caller's clock
-- ARGV[2]    the reserve script's reservation_ttl_ms (the bug reads it here)
local function live_holds(holds_key, now_ms)
  local live = 0
  local horizon = now_ms + tonumber(ARGV[2])
  local entries = redis.call('HGETALL', holds_key)
  for index = 1, #entries, 2 do
    local hold = entries[index + 1]
    local colon = string.find(hold, ':', 1, true)
    local amount = tonumber(string.sub(hold, 1, colon - 1))
    local deadline_ms = tonumber(string.sub(hold, colon + 1))
    if deadline_ms <= horizon then
      redis.call('HDEL', holds_key, entries[index])
    else
      live = live + amount
    end
  end
  return live
end
