-- lab:include live_holds.lua
-- Admit one request against two caps at once -- its subject's and its
-- namespace's -- and hold the estimate in both scopes under one reservation id.
--
-- KEYS[1]  settled spend of the subject (an integer counter)
-- KEYS[2]  live holds of the subject: hash of reservation id -> "amount:deadline_ms"
-- KEYS[3]  settled spend of the whole namespace
-- KEYS[4]  live holds of the whole namespace, same shape as KEYS[2]
-- ARGV     now_ms, reservation_ttl_ms, subject_cap, namespace_cap, estimate,
--          reservation_id
--
-- Returns 1 (admitted; the hold is written in both hashes), 0 (no room under
-- the subject cap) or 2 (no room under the namespace cap).
--
-- Redis keeps whatever a script wrote before an error or an early return, so
-- both caps are decided before the first hold is written: a denial by either
-- scope leaves no half-hold in the other. Expired holds are dropped from both
-- hashes first (`live_holds`, in the fragment the first line includes), so a
-- dead replica's estimate stops counting in both scopes at its deadline. The
-- clock is the caller's (now_ms), never the server's.

local now_ms = tonumber(ARGV[1])
local ttl_ms = tonumber(ARGV[2])
local subject_cap = tonumber(ARGV[3])
local namespace_cap = tonumber(ARGV[4])
local estimate = tonumber(ARGV[5])
local reservation_id = ARGV[6]

local subject_live = live_holds(KEYS[2], now_ms)
local namespace_live = live_holds(KEYS[4], now_ms)
local subject_settled = tonumber(redis.call('GET', KEYS[1]) or '0')
local namespace_settled = tonumber(redis.call('GET', KEYS[3]) or '0')

if subject_settled + subject_live + estimate > subject_cap then
  return 0
end
if namespace_settled + namespace_live + estimate > namespace_cap then
  return 2
end

local hold = estimate .. ':' .. (now_ms + ttl_ms)
-- Each hash outlives its newest hold, so an idle scope's holds vanish even
-- when no later reserve comes by to reclaim them.
redis.call('HSET', KEYS[2], reservation_id, hold)
redis.call('PEXPIRE', KEYS[2], ttl_ms * 2)
redis.call('HSET', KEYS[4], reservation_id, hold)
redis.call('PEXPIRE', KEYS[4], ttl_ms * 2)
return 1
