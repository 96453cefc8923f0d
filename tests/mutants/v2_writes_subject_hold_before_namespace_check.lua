-- lab:include live_holds.lua
-- Mutant of reserve_v2.lua: writes the subject's hold as soon as the subject
-- cap has room, and only then checks the namespace cap. Redis keeps what a
-- script wrote before an early return, so a request the namespace denies
-- leaves a hold in its subject's hash that no request will settle: a leaked
-- hold, counted against the subject until its deadline.
--
-- KEYS[1]  settled spend of the subject     KEYS[2]  live holds of the subject
-- KEYS[3]  settled spend of the namespace   KEYS[4]  live holds of the namespace
-- ARGV     now_ms, reservation_ttl_ms, subject_cap, namespace_cap, estimate,
--          reservation_id

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

local hold = estimate .. ':' .. (now_ms + ttl_ms)
redis.call('HSET', KEYS[2], reservation_id, hold)
redis.call('PEXPIRE', KEYS[2], ttl_ms * 2)

if namespace_settled + namespace_live + estimate > namespace_cap then
  return 2
end

redis.call('HSET', KEYS[4], reservation_id, hold)
redis.call('PEXPIRE', KEYS[4], ttl_ms * 2)
return 1
