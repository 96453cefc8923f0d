-- Add ARGV[1] to the counter KEYS[1] unless it would pass ARGV[2] (the
-- JSON-safe bound): the new value, or -1 refused (av_state's ADD_LUA).
local current = tonumber(redis.call('GET', KEYS[1]) or '0')
local amount = tonumber(ARGV[1])
local limit = tonumber(ARGV[2])
if current > limit or amount > limit - current then
    -- Keep an actively refused counter alive, as try_spend does.
    if redis.call('EXISTS', KEYS[1]) == 1 then
        redis.call('EXPIRE', KEYS[1], ${COUNTER_TTL_SECONDS})
    end
    return -1
end
local result = redis.call('INCRBY', KEYS[1], ARGV[1])
-- The same TTL as try_spend: a counter touched only through add (bookkeeping,
-- telemetry) would otherwise live forever and leak memory until Redis OOMs.
redis.call('EXPIRE', KEYS[1], ${COUNTER_TTL_SECONDS})
return result
