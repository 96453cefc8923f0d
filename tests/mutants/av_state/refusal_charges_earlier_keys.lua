-- Mutant of try_spend.lua: each counter is checked and charged in one loop,
-- so a refusal on a later counter leaves the earlier ones charged (the seed
-- checks every spend before charging any: 004_3d0b2b7832cd8f83.txt:31-84).
for i, key in ipairs(KEYS) do
    local current = tonumber(redis.call('GET', key) or '0')
    local amount = tonumber(ARGV[(i - 1) * 2 + 1])
    local limit = tonumber(ARGV[(i - 1) * 2 + 2])
    if current > limit or amount > limit - current then
        for _, other in ipairs(KEYS) do
            if redis.call('EXISTS', other) == 1 then
                redis.call('EXPIRE', other, ${COUNTER_TTL_SECONDS})
            end
        end
        return {-1, i}
    end
    redis.call('INCRBY', key, amount)
    redis.call('EXPIRE', key, ${COUNTER_TTL_SECONDS})
end
local min_remaining = -1
for i, key in ipairs(KEYS) do
    local limit = tonumber(ARGV[(i - 1) * 2 + 2])
    local remaining = limit - tonumber(redis.call('GET', key))
    if remaining < 0 then
        remaining = 0
    end
    if min_remaining == -1 or remaining < min_remaining then
        min_remaining = remaining
    end
end
return {min_remaining, 0}
