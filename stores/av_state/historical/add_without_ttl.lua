-- add.lua before it expired what it wrote (av_state.variants.add_without_ttl).
-- INCRBY alone: a counter only add touches (bookkeeping, telemetry) has no
-- TTL and lives until someone deletes it; left behind by a session that
-- ended without its cleanup, it stays in Redis forever.
local current = tonumber(redis.call('GET', KEYS[1]) or '0')
local amount = tonumber(ARGV[1])
local limit = tonumber(ARGV[2])
if current > limit or amount > limit - current then
    if redis.call('EXISTS', KEYS[1]) == 1 then
        redis.call('EXPIRE', KEYS[1], ${COUNTER_TTL_SECONDS})
    end
    return -1
end
return redis.call('INCRBY', KEYS[1], ARGV[1])
