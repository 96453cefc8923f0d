-- Check every spend, then charge every spend, in one script, so the batch is
-- atomic across every client (av_state's TRY_SPEND_LUA, seed 004).
-- KEYS: the counters; ARGV: amount and limit of each, in KEYS order.
-- Reply: {-1, index} (1-based) refused, nothing charged; {min_remaining, 0}
-- committed, where min_remaining is the smallest headroom left (-1: no keys).
-- The check subtracts, so `current + amount` never rounds in a Lua double.
for i, key in ipairs(KEYS) do
    local current = tonumber(redis.call('GET', key) or '0')
    local amount = tonumber(ARGV[(i - 1) * 2 + 1])
    local limit = tonumber(ARGV[(i - 1) * 2 + 2])
    if current > limit or amount > limit - current then
        -- Refresh the TTL of every existing key before refusing. Otherwise a
        -- session at its cap that keeps retrying (every attempt refused, the
        -- commit loop never reached) has its counter expire a day after its
        -- last successful spend, and the next attempt sees 0: the cap
        -- silently resets mid-session. The TTL reclaims abandoned sessions;
        -- an actively retrying session is not abandoned.
        for _, other in ipairs(KEYS) do
            if redis.call('EXISTS', other) == 1 then
                redis.call('EXPIRE', other, ${COUNTER_TTL_SECONDS})
            end
        end
        return {-1, i}
    end
end
-- The headroom is measured inside the same script that commits, so it cannot
-- race a concurrent remove_prefix, spend or refund on the same keys.
local min_remaining = -1
for i, key in ipairs(KEYS) do
    local amount = tonumber(ARGV[(i - 1) * 2 + 1])
    local limit = tonumber(ARGV[(i - 1) * 2 + 2])
    local new = redis.call('INCRBY', key, amount)
    redis.call('EXPIRE', key, ${COUNTER_TTL_SECONDS})
    local remaining = limit - new
    if remaining < 0 then
        remaining = 0
    end
    if min_remaining == -1 or remaining < min_remaining then
        min_remaining = remaining
    end
end
return {min_remaining, 0}
