-- Fragment (prepended to the reserve scripts, see `script` in redis_budget.py):
-- sum the holds of one scope that are still live, dropping the expired ones,
-- so a replica that died while holding an estimate cannot wedge the budget for
-- longer than the reservation TTL.
--
-- holds_key  a hash of reservation id -> "amount:deadline_ms"
-- now_ms     the caller's clock (never the server's)
local function live_holds(holds_key, now_ms)
  local live = 0
  local entries = redis.call('HGETALL', holds_key)
  for index = 1, #entries, 2 do
    local hold = entries[index + 1]
    local colon = string.find(hold, ':', 1, true)
    local amount = tonumber(string.sub(hold, 1, colon - 1))
    local deadline_ms = tonumber(string.sub(hold, colon + 1))
    if deadline_ms <= now_ms then
      redis.call('HDEL', holds_key, entries[index])
    else
      live = live + amount
    end
  end
  return live
end
