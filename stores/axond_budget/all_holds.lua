-- Fragment swapped in for live_holds.lua by the `NoReclaim` variant
-- (variants.py): the reserve before expired holds were reclaimed. It sums
-- every hold of one scope whatever its deadline, and deletes nothing, so a
-- hold whose request died keeps counting until the whole hash expires.
--
-- holds_key  a hash of reservation id -> "amount:deadline_ms"
-- now_ms     the caller's clock, unused: no deadline is looked at
local function live_holds(holds_key, now_ms)
  local held = 0
  local entries = redis.call('HGETALL', holds_key)
  for index = 2, #entries, 2 do
    local hold = entries[index]
    local colon = string.find(hold, ':', 1, true)
    held = held + tonumber(string.sub(hold, 1, colon - 1))
  end
  return held
end
